"""Tables of the longer EPPO runs (studies/2026-11-26_eppo_vs_ppo_short_runs/README.md), complete or stopped early,
over a common prefix.

Usage: python studies/2026-11-26_eppo_vs_ppo_short_runs/analyze_long.py ROOT [--up-to STEP] \\
           [--cells PPO,EPPO_ind_k0.01] [--plot FIG.png]
Reads ROOT/<cell>/seed<N>/ (evaluations.csv, config.json, plasticity.csv) for every cell directory under ROOT, or
the --cells given (PPO first). Every run is cut at the same step S: --up-to, or else the last evaluation step every
run has reached (a run that finished ends at its total; one stopped early at its last evaluation), so that the cells
compare the same stretch of training. Per cell:
- AULC over the evaluations at steps <= S and Final Return over the tasks that end at or before S
  (scripts/summarize.py's definitions, which a complete run reproduces exactly), mean ± se over seeds, per seed,
  and the paper's one-sided paired t-test over seeds of "cell > PPO";
- the critic's and actor's plasticity metrics averaged over the task ends at or before S;
- with --plot: every seed's evaluation curve (thin) and the mean over seeds (thick) per cell, up to S, with the
  task changes as dotted lines (scripts/plot_curves.py draws complete runs only).
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from analyze_confirm import paired_p, plasticity  # noqa: E402
from scripts import summarize  # noqa: E402

PLASTICITY_KEYS = [(network, metric) for network in ("critic", "actor")
                   for metric in ("effective_rank", "stable_rank", "dormant_percent")]


def load_cells(root: str, only=None) -> dict:
    """cell -> seed -> (run_dir, evaluations, steps_per_task, total steps)."""
    names = sorted(name for name in os.listdir(root) if os.path.isdir(os.path.join(root, name))
                   and (only is None or name in only))
    cells = {}
    for cell in sorted(names, key=lambda name: (name != "PPO", name)):
        for seed_dir in sorted(os.listdir(os.path.join(root, cell))):
            run_dir = os.path.join(root, cell, seed_dir)
            path = os.path.join(run_dir, "evaluations.csv")
            if not os.path.exists(path):
                continue
            with open(os.path.join(run_dir, "config.json")) as f:
                args = json.load(f)["args"]
            cells.setdefault(cell, {})[args["seed"]] = (run_dir, summarize.read_evaluations(path),
                                                         args["steps_per_task"],
                                                         args["steps_per_task"] * args["num_tasks"])
    return cells


def prefix_metrics(evaluations, steps_per_task: int, up_to: int) -> tuple:
    """(AULC, Final Return, tasks ended) of the evaluations at steps <= up_to."""
    kept = [e for e in evaluations if e.global_step <= up_to]
    tasks_ended = up_to // steps_per_task
    final = summarize.final_return(kept, steps_per_task, tasks_ended) if tasks_ended else float("nan")
    return summarize.aulc(kept), final, tasks_ended


def plot(cells: dict, up_to: int, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.5))
    for color, (cell, runs) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], cells.items()):
        curves = []
        for run_dir, evaluations, steps_per_task, _ in runs.values():
            kept = [e for e in evaluations if e.global_step <= up_to]
            steps = [e.global_step for e in kept]
            curves.append([e.return_mean for e in kept])
            axis.plot(steps, curves[-1], color=color, alpha=0.3, linewidth=0.8)
        length = min(len(curve) for curve in curves)
        mean = np.mean([curve[:length] for curve in curves], axis=0)
        axis.plot(steps[:length], mean, color=color, linewidth=2.2, label=f"{cell} (n = {len(curves)})")
    for boundary in range(steps_per_task, up_to, steps_per_task):
        axis.axvline(boundary, color="gray", linestyle=":", linewidth=0.8)
    axis.set_xlabel("environment steps")
    axis.set_ylabel("evaluation return")
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"\nwrote {path}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root")
    parser.add_argument("--up-to", type=int, help="cut every run at this step (default: the common last step)")
    parser.add_argument("--cells", help="comma list of the cells to read (default: every cell directory)")
    parser.add_argument("--plot", help="also draw the curves (thin: seeds, thick: mean) into this image file")
    parser.add_argument("--title", help="the figure's title, before the step it is cut at (default: ROOT's name)")
    args = parser.parse_args(argv)
    cells = load_cells(args.root, args.cells.split(",") if args.cells else None)
    reached = min(run[1][-1].global_step for runs in cells.values() for run in runs.values())
    total = max(run[3] for runs in cells.values() for run in runs.values())
    up_to = args.up_to if args.up_to is not None else reached
    if up_to > reached:
        sys.exit(f"error: --up-to {up_to} is beyond the step every run has reached ({reached})")
    print(f"Cut at step {up_to} of {total}" + (" (every run complete)" if up_to == total else
                                                " (runs stopped early; the same prefix for every run)"))
    metrics = {cell: {seed: prefix_metrics(run[1], run[2], up_to) for seed, run in runs.items()}
               for cell, runs in cells.items()}
    tasks_ended = next(iter(next(iter(metrics.values())).values()))[2]
    for index, label in ((0, "AULC"), (1, f"Final Return (over the {tasks_ended} task ends)")):
        print(f"\n#### {label}\n")
        print("| cell | n | mean ± se | p (one-sided paired, cell > PPO) | per seed |")
        print("|---|---:|---|---|---|")
        for cell, per_seed in metrics.items():
            values = {seed: m[index] for seed, m in per_seed.items()}
            mean, se = summarize.mean_se(np.array(list(values.values())))
            p = ("" if cell == "PPO"
                 else "%.3f (n=%d)" % paired_p(values, {s: m[index] for s, m in metrics["PPO"].items()}))
            seeds = ", ".join(f"{seed}: {values[seed]:.0f}" for seed in sorted(values))
            print(f"| {cell} | {len(values)} | {mean:.0f} ± {se:.0f} | {p} | {seeds} |")
    print("\n#### Plasticity, mean over the task ends (mean ± se over seeds)\n")
    print("| cell | n | " + " | ".join(f"{n} {m}" for n, m in PLASTICITY_KEYS) + " |")
    print("|---|---:|" + "---|" * len(PLASTICITY_KEYS))
    for cell, runs in cells.items():
        per_run = [plasticity(run[0], last_only=False, up_to=up_to) for run in runs.values()]
        shown = [("%.1f ± %.1f" % summarize.mean_se([p[key] for p in per_run])) if all(key in p for p in per_run)
                 else "no task end yet" for key in PLASTICITY_KEYS]
        print(f"| {cell} | {len(per_run)} | " + " | ".join(shown) + " |")
    if args.plot:
        title = args.title or os.path.basename(os.path.normpath(args.root))
        plot(cells, up_to, args.plot, f"{title}: every seed (thin) and the mean (thick), up to step {up_to}")


if __name__ == "__main__":
    main()
