"""Confirmation table of the EPPO study (studies/2026-11-26_eppo_vs_ppo_short_runs/README.md): every cell against PPO
and the MSE control.

Usage: python studies/2026-11-26_eppo_vs_ppo_short_runs/analyze_confirm.py \\
           studies/2026-11-26_eppo_vs_ppo_short_runs/confirm [--versus A:B ...]
Reads <root>/<cell>/seed<N>/ for every cell directory under <root> (CELLS first, in that order, then the others)
(finished runs: summary.json) and prints Markdown:
- per cell: AULC and Final Return (scripts/summarize.py's definitions), mean ± se over seeds, the IQM with a
  stratified-bootstrap 95% interval (scripts/summarize.py --robust), per-seed values, and the critic's and actor's
  plasticity metrics at the last task end (plasticity.csv) and over all task ends;
- the paper's one-sided paired t-test over seeds (scipy.stats.ttest_rel, alternative="greater") of each cell
  against PPO (H1: the cell is better) and, for the EPPO_mean cells, of the MSE control against the cell
  (H1: the evidential loss makes the critic worse), and a two-sided paired test of the control against PPO;
- with --versus A:B, also the one-sided paired test of "A > B" over their common seeds (e.g.
  EPPO_ind_k0.01:EPPO_mean, the UCB bonus's share of a lead over PPO), and a two-sided paired test of each
  plasticity metric of A against B.
"""

import argparse
import csv
import os
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from scripts import summarize  # noqa: E402

CELLS = ["PPO", "EPPO_mean_mse", "EPPO_mean", "EPPO_ind_k0.01", "EPPO_mean_xi1", "EPPO_ind_k0.01_xi1"]


def cell_runs(root: str, cell: str) -> dict:
    """seed -> RunRecord of the finished runs of a cell."""
    directory = os.path.join(root, cell)
    runs = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        run = summarize.load_run(os.path.join(directory, name))
        if run.complete:
            runs[int(name[len("seed"):])] = run
    return runs


def plasticity(run_dir: str, last_only: bool, up_to: int | None = None) -> dict:
    """(network, metric) -> value at the last task end, or the mean over the task ends, at 0 < step <= up_to
    (step 0 excluded; no bound without up_to; empty when no task has ended yet)."""
    with open(os.path.join(run_dir, "plasticity.csv"), newline="") as f:
        rows = [row for row in csv.DictReader(f)
                if 0 < int(row["global_step"]) and (up_to is None or int(row["global_step"]) <= up_to)]
    if last_only and rows:
        last_step = max(int(row["global_step"]) for row in rows)
        rows = [row for row in rows if int(row["global_step"]) == last_step]
    values = {}
    for row in rows:
        for metric in ("effective_rank", "stable_rank", "dormant_percent"):
            values.setdefault((row["network"], metric), []).append(float(row[metric]))
    return {key: float(np.mean(v)) for key, v in values.items()}


def paired_p(better: dict, worse: dict, alternative: str = "greater") -> tuple:
    seeds = sorted(set(better) & set(worse))
    if len(seeds) < 2:
        return float("nan"), len(seeds)
    return float(stats.ttest_rel([better[s] for s in seeds], [worse[s] for s in seeds],
                                 alternative=alternative).pvalue), len(seeds)


def main(root: str, versus: list[tuple[str, str]]) -> None:
    present = sorted(name for name in os.listdir(root) if os.path.isdir(os.path.join(root, name)))
    cells = [cell for cell in CELLS if cell in present] + [cell for cell in present if cell not in CELLS]
    runs = {cell: cell_runs(root, cell) for cell in cells}
    metric_values = {cell: {m: {s: getattr(r, m) for s, r in rs.items()} for m in summarize.METRICS}
                     for cell, rs in runs.items()}
    for metric in summarize.METRICS:
        print(f"\n### {summarize.METRIC_LABELS[metric]}\n")
        print("| cell | n | mean ± se | IQM [95% CI] | vs PPO: p (one-sided, cell > PPO) | "
              "control vs cell: p (one-sided, control > cell) | per seed |")
        print("|---|---:|---|---|---|---|---|")
        for cell in cells:
            values = metric_values[cell][metric]
            if not values:
                print(f"| {cell} | 0 | not run | | | | |")
                continue
            array = np.array([values[s] for s in sorted(values)])
            mean, se = summarize.mean_se(array)
            point, low, high = summarize.bootstrap_interval([array], summarize.iqm, reps=2000, seed=0)
            p_ppo = "" if cell == "PPO" else "%.3f (n=%d)" % paired_p(values, metric_values["PPO"][metric])
            if cell == "EPPO_mean_mse":
                p, n = paired_p(values, metric_values["PPO"][metric], "two-sided")
                p_control = f"two-sided vs PPO: {p:.3f} (n={n})"
            elif cell.startswith("EPPO_mean") and "EPPO_mean_mse" in cells:
                p_control = "%.3f (n=%d)" % paired_p(metric_values["EPPO_mean_mse"][metric], values)
            else:
                p_control = ""
            per_seed = ", ".join(f"{s}: {values[s]:.0f}" for s in sorted(values))
            print(f"| {cell} | {len(array)} | {mean:.0f} ± {se:.0f} | {point:.0f} [{low:.0f}, {high:.0f}] | {p_ppo} | "
                  f"{p_control} | {per_seed} |")
        for better, worse in versus:
            p, n = paired_p(metric_values[better][metric], metric_values[worse][metric])
            print(f"\n{better} > {worse}: one-sided paired p = {p:.3f} (n = {n})")
    for last_only, label in ((True, "at the last task end"), (False, "mean over the task ends")):
        plasticity_values = {}  # cell -> (network, metric) -> seed -> value
        print(f"\n### Plasticity {label} (mean ± se over seeds)\n")
        keys = [(n, m) for n in ("critic", "actor") for m in ("effective_rank", "stable_rank", "dormant_percent")]
        print("| cell | n | " + " | ".join(f"{n} {m}" for n, m in keys) + " |")
        print("|---|---:|" + "---|" * len(keys))
        for cell in cells:
            if not runs[cell]:
                continue
            per_seed = {seed: plasticity(run.run_dir, last_only) for seed, run in runs[cell].items()}
            plasticity_values[cell] = {key: {seed: p[key] for seed, p in per_seed.items()} for key in keys}
            shown = []
            for key in keys:
                mean, se = summarize.mean_se(np.array(list(plasticity_values[cell][key].values())))
                shown.append(f"{mean:.1f} ± {se:.1f}")
            print(f"| {cell} | {len(per_seed)} | " + " | ".join(shown) + " |")
        for first, second in [pair for pair in versus if all(cell in plasticity_values for cell in pair)]:
            tests = [paired_p(plasticity_values[first][key], plasticity_values[second][key], "two-sided")
                     for key in keys]
            print(f"| {first} vs {second}: p (two-sided paired) | {tests[0][1]} | "
                  + " | ".join(f"{p:.3f}" for p, _ in tests) + " |")


def parse_pair(text: str) -> tuple[str, str]:
    better, separator, worse = text.partition(":")
    if not separator or not better or not worse:
        raise argparse.ArgumentTypeError(f"{text!r} is not A:B (two cell names)")
    return better, worse


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root")
    parser.add_argument("--versus", type=parse_pair, action="append", default=[], metavar="A:B",
                        help='also test "A > B" (one-sided, paired over the common seeds); repeatable')
    options = parser.parse_args()
    present = {name for name in os.listdir(options.root) if os.path.isdir(os.path.join(options.root, name))}
    for pair in options.versus:
        for cell in pair:
            if cell not in present:
                parser.error(f"--versus: no cell {cell!r} under {options.root}; there are {', '.join(sorted(present))}")
    main(options.root, options.versus)
