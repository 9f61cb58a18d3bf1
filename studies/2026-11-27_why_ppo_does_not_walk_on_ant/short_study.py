"""The short Ant study (Ant-v5 paralysis back-one, 5 tasks x 200k steps, seeds 1-5), PPO against
EPPO_ind (kappa 0.01), with v0.1's defaults and with v0.2's (`d3270e2`), side by side.

    # the new default's runs:
    bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.sh PPO
    bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.sh EPPO_ind
    bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.sh --collect
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.py \\
        > studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.md
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.py \\
        --plot studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.png
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.py --methods PPO   # one method's defaults only

The old default's runs are the committed ones of studies/2026-11-26_eppo_vs_ppo_short_runs/ant_long/ (seeds 1-5 of
its 10; commit 7431552, the same commands); the new default's are
studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_outputs/ (short_study.sh, commit d3270e2). Every run is cut at
the step that every run has reached (the header says so while runs are unfinished; no verdict then).
Prints, in Markdown:
1. per default and method: AULC and Final Return (scripts/summarize.py's definitions), mean ± se over seeds, the
   IQM with its 95% stratified-bootstrap interval, every seed; the paper's one-sided paired t-test of
   "EPPO_ind > PPO" within each default, and of "new default > old default" for each method (paired by seed);
2. the return of standing still (each run's step-0 evaluation, about 990) and how often and from when each run's
   evaluations are above it;
3. the critic's and actor's dormant units and effective rank averaged over the task ends (the paper's statistic).
With --plot: every seed (thin) and the seed mean (thick) of the four cells, the task changes dotted.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "studies", "2026-11-26_eppo_vs_ppo_short_runs"))
from analyze_confirm import plasticity  # noqa: E402
from analyze_long import load_cells, plot, prefix_metrics  # noqa: E402
from scripts import summarize  # noqa: E402

SEEDS = (1, 2, 3, 4, 5)
DEFAULTS = {  # label -> the directory of its runs
    "old default": os.path.join(REPO, "studies", "2026-11-26_eppo_vs_ppo_short_runs", "ant_long"),
    "new default": os.path.join(HERE, "short_outputs"),
}
METHODS = {"PPO": "PPO", "EPPO_ind": "EPPO_ind_k0.01"}  # label -> run directory name
PLASTICITY_KEYS = [("critic", "dormant_percent"), ("critic", "effective_rank"),
                   ("actor", "dormant_percent"), ("actor", "effective_rank")]


def load(defaults: dict = DEFAULTS, methods=tuple(METHODS)) -> dict:
    """(default, method) -> seed -> (run_dir, evaluations, steps_per_task, total steps), seeds 1-5 only."""
    cells = {}
    for default, root in defaults.items():
        found = load_cells(root, list(METHODS.values())) if os.path.isdir(root) else {}
        for method, directory in ((m, METHODS[m]) for m in methods):
            runs = {seed: run for seed, run in found.get(directory, {}).items() if seed in SEEDS}
            if runs:
                cells[(default, method)] = runs
    return cells


def above_standing_still(evaluations: list, up_to: int) -> tuple:
    """(evaluations after step 0 above the step-0 return, evaluations after step 0, first step above it or None)."""
    baseline = evaluations[0].return_mean
    later = [e for e in evaluations if 0 < e.global_step <= up_to]
    above = [e.global_step for e in later if e.return_mean > baseline]
    return len(above), len(later), (above[0] if above else None)


def fmt(values) -> str:
    mean, se = summarize.mean_se(values)
    return f"{mean:,.0f} ± {se:,.0f}"


def p_text(better: dict, worse: dict) -> str:
    p, n = summarize.paired_pvalue(better, worse)
    return f"{p:.3f} (n {n})" if n >= 2 else "–"


def report(cells: dict) -> int:
    reached = min(run[1][-1].global_step for runs in cells.values() for run in runs.values())
    total = max(run[3] for runs in cells.values() for run in runs.values())
    steps_per_task = next(iter(next(iter(cells.values())).values()))[2]
    print(f"### Ant-v5 paralysis back-one, 5 tasks × 200k, seeds 1-5: cut at step {reached:,} of {total:,} "
          + ("(every run complete)" if reached == total else "(UNFINISHED: no verdict)") + "\n")
    metrics = {cell: {seed: prefix_metrics(run[1], steps_per_task, reached) for seed, run in runs.items()}
               for cell, runs in cells.items()}
    for index, label in ((0, "AULC"), (1, f"Final Return (over the {reached // steps_per_task} task ends)")):
        if index == 1 and reached < steps_per_task:
            break  # no task has ended yet
        print(f"#### {label}\n")
        print("| default | method | n | mean ± se | IQM [95% CI] | EPPO_ind > PPO, p | new > old default, p "
              "| per seed |")
        print("|---|---|---:|---|---|---|---|---|")
        for (default, method), per_seed in metrics.items():
            values = {seed: m[index] for seed, m in per_seed.items()}
            point, low, high = summarize.bootstrap_interval([list(values.values())])
            rival = metrics.get((default, "PPO")) if method == "EPPO_ind" else None
            versus_ppo = p_text(values, {s: m[index] for s, m in rival.items()}) if rival else ""
            old = metrics.get(("old default", method)) if default == "new default" else None
            versus_old = p_text(values, {s: m[index] for s, m in old.items()}) if old else ""
            seeds = ", ".join(f"{values[s]:,.0f}" for s in sorted(values))
            print(f"| {default} | {method} | {len(values)} | {fmt(values.values())} | {point:,.0f} [{low:,.0f}, "
                  f"{high:,.0f}] | {versus_ppo} | {versus_old} | {seeds} |")
        print()
    print("#### Above the return of standing still (each run's step-0 evaluation)\n")
    print("| default | method | step-0 return | evaluations above it after step 0 | first step above it, per seed |")
    print("|---|---|---|---|---|")
    for (default, method), runs in cells.items():
        counts = {seed: above_standing_still(run[1], reached) for seed, run in sorted(runs.items())}
        above, later = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
        firsts = ", ".join("never" if c[2] is None else f"{c[2] // 1000}k" for c in counts.values())
        print(f"| {default} | {method} | {fmt([run[1][0].return_mean for run in runs.values()])} | "
              f"{above} of {later} ({above / later:.0%}) | {firsts} |")
    print("\n#### Plasticity: each seed's average over the task ends, mean ± se over seeds\n")
    print("| default | method | " + " | ".join(f"{network} {metric}" for network, metric in PLASTICITY_KEYS) + " |")
    print("|---|---|" + "---|" * len(PLASTICITY_KEYS))
    for (default, method), runs in cells.items():
        per_run = [plasticity(run[0], last_only=False, up_to=reached) for run in runs.values()]
        shown = ["%.1f ± %.1f" % summarize.mean_se([p[key] for p in per_run]) if all(key in p for p in per_run)
                 else "no task end yet" for key in PLASTICITY_KEYS]
        print(f"| {default} | {method} | " + " | ".join(shown) + " |")
    return reached


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", help="draw the four cells' curves into this image file instead of the tables")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma list of the methods (default: both); "
                        "PPO alone compares its defaults while EPPO_ind still runs")
    args = parser.parse_args(argv)
    methods = args.methods.split(",")
    if not set(methods) <= set(METHODS):
        parser.error(f"--methods takes {', '.join(METHODS)}, got {args.methods}")
    cells = load(methods=methods)
    if args.plot:
        reached = min(run[1][-1].global_step for runs in cells.values() for run in runs.values())
        plot({f"{method}, {default}": runs for (default, method), runs in cells.items()}, reached, args.plot,
             f"Ant-v5 paralysis back-one, 5 × 200k, seeds 1-5: every seed (thin), the mean (thick), up to {reached:,}")
    else:
        report(cells)


if __name__ == "__main__":
    main()
