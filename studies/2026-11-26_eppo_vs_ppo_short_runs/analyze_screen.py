"""Screening table and critic diagnostics of the EPPO study (studies/2026-11-26_eppo_vs_ppo_short_runs/README.md).

Usage: python studies/2026-11-26_eppo_vs_ppo_short_runs/analyze_screen.py /work/study/screen [cell ...]
For every cell directory (one run directory per seed, seed<N>/) that holds finished or running runs:
- AULC: the mean of return_mean over the evaluation points of evaluations.csv (scripts/summarize.py's definition),
  mean ± se over the seeds whose run finished (summary.json), and the last evaluation's return;
- the evidential critic's diagnostics from the TensorBoard event files (EPPO cells; see eppo_continuous.py's module
  docstring): each run's median over its updates of the first task and of the later tasks, then the mean over seeds.
"""

import glob
import json
import os
import sys

import numpy as np

DIAGNOSTICS = ["evidential/student_t_scale", "evidential/targets_outside_2_scales", "evidential/zeta",
               "evidential/critic_grad_norm", "evidential/grad_share_omega", "plasticity/critic_max_abs_grad",
               "losses/explained_variance"]
SHORT = {"evidential/student_t_scale": "scale", "evidential/targets_outside_2_scales": "out>2s",
         "evidential/zeta": "zeta", "evidential/critic_grad_norm": "\\|g\\|", "evidential/grad_share_omega": "share_w",
         "plasticity/critic_max_abs_grad": "max\\|g\\|",
         "losses/explained_variance": "EV"}


def read_evaluations(run_dir):
    rows = np.genfromtxt(os.path.join(run_dir, "evaluations.csv"), delimiter=",", names=True)
    return np.atleast_1d(rows["global_step"]), np.atleast_1d(rows["return_mean"])


def read_scalars(run_dir, tags):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    accumulator.Reload()
    available = set(accumulator.Tags()["scalars"])
    return {tag: np.array([(e.step, e.value) for e in accumulator.Scalars(tag)]) for tag in tags if tag in available}


def mean_se(values):
    values = np.asarray(values, float)
    if len(values) == 0:
        return float("nan"), float("nan")
    return values.mean(), (values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan"))


def main(root, cells):
    cells = cells or sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    header = ["cell", "seeds", "AULC mean ± se", "per-seed AULC", "last eval per seed"]
    header += [f"{SHORT[t]} task0/later" for t in DIAGNOSTICS]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for cell in cells:
        runs = sorted(glob.glob(os.path.join(root, cell, "seed*")), key=lambda run: int(run.rsplit("seed", 1)[1]))
        runs = [r for r in runs if os.path.isdir(r) and os.path.exists(os.path.join(r, "summary.json"))]
        if not runs:
            continue
        aulcs, lasts, diagnostics = [], [], {t: ([], []) for t in DIAGNOSTICS}
        steps_per_task = None
        for run in runs:
            with open(os.path.join(run, "config.json")) as f:
                steps_per_task = json.load(f)["args"]["steps_per_task"]
            _, returns = read_evaluations(run)
            aulcs.append(returns.mean())
            lasts.append(returns[-1])
            for tag, points in read_scalars(run, DIAGNOSTICS).items():
                first = points[points[:, 0] <= steps_per_task, 1]
                later = points[points[:, 0] > steps_per_task, 1]
                diagnostics[tag][0].append(np.median(first))
                diagnostics[tag][1].append(np.median(later))
        m, se = mean_se(aulcs)
        row = [cell, str(len(runs)), f"{m:.0f} ± {se:.0f}", ", ".join(f"{a:.0f}" for a in aulcs),
               ", ".join(f"{a:.0f}" for a in lasts)]
        for tag in DIAGNOSTICS:
            first, later = diagnostics[tag]
            row.append(f"{np.mean(first):.3g} / {np.mean(later):.3g}" if first else "-")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
