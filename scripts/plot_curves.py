"""Learning curves and plasticity figures of a sweep (the paper's Appendix figures), PNG and PDF.

    python scripts/plot_curves.py runs/sweep [--out runs/sweep/plots] [--methods PPO,EPPO_cor] [--bootstrap-reps 2000]

Per setting (experiment/env/strategy):
- <out>/<experiment>_<env>_<strategy>_curves.{png,pdf}: mean evaluation return over seeds vs environment
  steps with a shaded one-standard-error band, vertical dotted lines at the task changes, and legend
  entries "method: AULC mean ± se, Final Return mean ± se" (the paper's legend order);
- ..._seeds.{png,pdf}: one panel per method, every seed's learning curve as a thin line (labelled with its
  seed at its end) beside the mean over seeds: a mean hides seeds that split into a high and a low mode;
- ..._profile.{png,pdf}: performance profiles (Agarwal et al. 2021, as rliable draws them): for AULC and
  Final Return, the fraction of each method's runs scoring > tau against tau, with 95% percentile
  intervals of a bootstrap over seeds (--bootstrap-reps, default 2000; --bootstrap-seed, default 0;
  summarize.performance_profile, see docs/statistics.md). One curve above another everywhere = better
  at every threshold;
- with plasticity.csv in the runs: ..._plasticity_box.{png,pdf}: effective rank, stable rank and dormant
  unit % per method as box plots over seeds, each seed's value averaged over its task ends (paper
  Appendix "Plasticity preservation analysis"); ..._plasticity_evolution.{png,pdf}: the same metrics
  over training (mean ± se over seeds).
Only complete runs are drawn (the runs scripts/summarize.py puts in its tables); others are listed.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys

import numpy as np

if __package__:  # imported as scripts.plot_curves
    from . import summarize
else:  # run as python scripts/plot_curves.py
    import summarize

PLASTICITY_METRICS = {"effective_rank": "effective rank", "stable_rank": "stable rank", "dormant_percent": "dormant units (%)"}
LINE_STYLES = ["--", ":", "-.", "-"]


def seed_curves(runs: list[summarize.RunRecord]) -> tuple[np.ndarray, np.ndarray]:
    """(steps, returns): the evaluation return of every run (one row per run) on the step grid they share."""
    grids = {tuple(e.global_step for e in run.evaluations) for run in runs}
    if len(grids) != 1:
        raise ValueError(f"runs evaluated at different steps cannot be averaged: {sorted(r.run_dir for r in runs)}")
    return np.array(grids.pop()), np.array([[e.return_mean for e in run.evaluations] for run in runs])


def mean_curve(runs: list[summarize.RunRecord]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, standard error) of the evaluation return over runs that share one step grid."""
    steps, returns = seed_curves(runs)
    se = returns.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else np.zeros(returns.shape[1])
    return steps, returns.mean(axis=0), se


def profile_taus(cells: dict[str, list[summarize.RunRecord]], metric: str, points: int = 201) -> np.ndarray:
    """The thresholds of a performance profile: `points` values evenly spaced from just below the lowest to
    the highest `metric` of all runs drawn (so the profiles start at 1 and end at 0)."""
    values = np.array([getattr(r, metric) for runs in cells.values() for r in runs], dtype=float)
    low, high = float(values.min()), float(values.max())
    pad = 0.02 * (high - low) if high > low else max(1.0, 0.02 * abs(high))
    return np.linspace(low - pad, high, points)


def legend_label(method: str, runs: list[summarize.RunRecord], decimals: int) -> str:
    aulc_mean, aulc_se = summarize.mean_se(r.aulc for r in runs)
    final_mean, final_se = summarize.mean_se(r.final_return for r in runs)
    n = summarize._number
    return f"{method}: {n(aulc_mean, decimals)} ± {n(aulc_se, decimals)}, {n(final_mean, decimals)} ± {n(final_se, decimals)}"


def read_plasticity(run_dir: str) -> list[dict]:
    """plasticity.csv rows as dicts with int steps and float metrics ([] when the file is absent)."""
    path = os.path.join(run_dir, "plasticity.csv")
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        return [
            {"global_step": int(row["global_step"]), "task": int(row["task"]), "network": row["network"],
             **{k: float(row[k]) for k in PLASTICITY_METRICS}}
            for row in csv.DictReader(f)
        ]  # fmt: skip


def task_end_plasticity(rows: list[dict], steps_per_task: int, num_tasks: int, network: str) -> dict[str, float] | None:
    """Each metric averaged over the run's task ends (steps (i + 1) * steps_per_task); None if any is missing."""
    ends = {(i + 1) * steps_per_task for i in range(num_tasks)}
    selected = [r for r in rows if r["network"] == network and r["global_step"] in ends]
    if len({r["global_step"] for r in selected}) != num_tasks:
        return None
    return {k: float(np.mean([r[k] for r in selected])) for k in PLASTICITY_METRICS}


def _save(figure, out: str, stem: str, formats: list[str]) -> list[str]:
    paths = []
    for extension in formats:
        path = os.path.join(out, f"{stem}.{extension}")
        figure.savefig(path, bbox_inches="tight", dpi=150)
        paths.append(path)
    return paths


def plot_seeds(setting, cells: dict[str, list[summarize.RunRecord]], out: str, formats: list[str]) -> list[str]:
    """<stem>_seeds: one panel per method, every seed's learning curve as a thin line (its seed number at its
    end) beside the mean over seeds (thick): shows what a mean hides, e.g. seeds split into two modes."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(cells), figsize=(4.2 * len(cells), 3.6), sharey=True, squeeze=False)
    any_run = next(iter(cells.values()))[0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (method, runs) in enumerate(cells.items()):
        ax, color = axes[0][k], colors[k % len(colors)]
        for i in range(1, any_run.num_tasks):
            ax.axvline(i * any_run.steps_per_task, color="black", linestyle=":", linewidth=0.8)
        steps, returns = seed_curves(runs)
        for run, curve in zip(runs, returns):
            ax.plot(steps, curve, color=color, linewidth=0.7, alpha=0.45)
            ax.annotate(str(run.seed), (steps[-1], curve[-1]), xytext=(2, 0), textcoords="offset points", fontsize=6, color=color, va="center")
        ax.plot(steps, returns.mean(axis=0), color=color, linewidth=2.2, label="mean")
        ax.set(title=f"{method} (n = {len(runs)} seeds)", xlabel="environment steps")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("evaluation return")
    axes[0][0].legend(fontsize="small", loc="upper left")
    figure.suptitle(f"{setting}: every seed (thin, seed number at the end) and the mean (thick)")
    figure.tight_layout()
    written = _save(figure, out, f"{setting.experiment}_{setting.env}_{setting.strategy}_seeds", formats)
    plt.close(figure)
    return written


def plot_profiles(setting, cells: dict[str, list[summarize.RunRecord]], out: str, formats: list[str], reps: int, seed: int) -> list[str]:
    """<stem>_profile: performance profiles (Agarwal et al. 2021): per metric, the fraction of a method's runs
    whose AULC (Final Return) is > tau, against tau, with a 95% bootstrap interval over the seeds."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(summarize.METRICS), figsize=(5.2 * len(summarize.METRICS), 3.8), squeeze=False)
    for col, metric in enumerate(summarize.METRICS):
        ax = axes[0][col]
        taus = profile_taus(cells, metric)
        for k, (method, runs) in enumerate(cells.items()):
            fraction, low, high = summarize.performance_profile([[getattr(r, metric) for r in runs]], taus, reps=reps, seed=seed)
            line = ax.plot(taus, fraction, LINE_STYLES[k % len(LINE_STYLES)], linewidth=1.8, label=f"{method} (n = {len(runs)})")[0]
            ax.fill_between(taus, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set(xlabel=f"{summarize.METRIC_LABELS[metric]} threshold τ", ylabel="fraction of runs with score > τ", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.suptitle(f"{setting}: performance profiles (95% bootstrap intervals over seeds, {reps} resamples)")
    figure.tight_layout()
    written = _save(figure, out, f"{setting.experiment}_{setting.env}_{setting.strategy}_profile", formats)
    plt.close(figure)
    return written


def plot_setting(setting, cells: dict[str, list[summarize.RunRecord]], out: str, formats: list[str], decimals: int,
                 reps: int = summarize.BOOTSTRAP_REPS, seed: int = 0) -> list[str]:  # fmt: skip
    import matplotlib.pyplot as plt

    stem = f"{setting.experiment}_{setting.env}_{setting.strategy}"
    written = []
    figure, axes = plt.subplots(figsize=(9, 4))
    any_run = next(iter(cells.values()))[0]
    for i in range(1, any_run.num_tasks):
        axes.axvline(i * any_run.steps_per_task, color="black", linestyle=":", linewidth=0.8)
    for k, (method, runs) in enumerate(cells.items()):
        steps, mean, se = mean_curve(runs)
        line = axes.plot(steps, mean, LINE_STYLES[k % len(LINE_STYLES)], linewidth=1.8, label=legend_label(method, runs, decimals))[0]
        axes.fill_between(steps, mean - se, mean + se, color=line.get_color(), alpha=0.2, linewidth=0)
    counts = sorted({len(r) for r in cells.values()})
    seeds = str(counts[0]) if len(counts) == 1 else "/".join(str(len(r)) for r in cells.values())
    axes.set(title=f"{setting} (n = {seeds} seeds)", xlabel="environment steps", ylabel="evaluation return")
    axes.legend(title="AULC, Final Return (mean ± se)", fontsize="small", title_fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    axes.grid(alpha=0.3)
    written += _save(figure, out, f"{stem}_curves", formats)
    plt.close(figure)
    written += plot_seeds(setting, cells, out, formats)
    written += plot_profiles(setting, cells, out, formats, reps, seed)

    plasticity = {m: {r.run_dir: read_plasticity(r.run_dir) for r in runs} for m, runs in cells.items()}
    found = {row["network"] for per_run in plasticity.values() for rows in per_run.values() for row in rows}
    networks = sorted(found, key=lambda name: (name != "critic", name))  # the critic first, as in the paper
    if not networks:
        return written

    figure, axes = plt.subplots(len(networks), 3, figsize=(12, 3.2 * len(networks)), squeeze=False)
    for row_index, network in enumerate(networks):
        for col, (metric, label) in enumerate(PLASTICITY_METRICS.items()):
            data, names = [], []
            for method, runs in cells.items():
                values = [task_end_plasticity(plasticity[method][r.run_dir], r.steps_per_task, r.num_tasks, network) for r in runs]
                values = [v[metric] for v in values if v is not None]
                if values:
                    data.append(values)
                    names.append(method)
            ax = axes[row_index][col]
            if data:
                ax.boxplot(data)
                ax.set_xticks(range(1, len(names) + 1), names, rotation=30)
            ax.set_title(f"{network}: {label}", fontsize="medium")
    figure.suptitle(f"{setting}: plasticity averaged over task ends (box: seeds)")
    figure.tight_layout()
    written += _save(figure, out, f"{stem}_plasticity_box", formats)
    plt.close(figure)

    figure, axes = plt.subplots(len(networks), 3, figsize=(12, 3.2 * len(networks)), squeeze=False)
    for row_index, network in enumerate(networks):
        for col, (metric, label) in enumerate(PLASTICITY_METRICS.items()):
            ax = axes[row_index][col]
            for k, (method, runs) in enumerate(cells.items()):
                series = [[(r["global_step"], r[metric]) for r in plasticity[method][run.run_dir] if r["network"] == network] for run in runs]
                series = [s for s in series if s]
                if not series or len({tuple(step for step, _ in s) for s in series}) != 1:
                    continue  # absent, or runs measured at different steps
                steps = np.array([step for step, _ in series[0]])
                values = np.array([[value for _, value in s] for s in series])
                mean = values.mean(axis=0)
                se = values.std(axis=0, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.zeros_like(mean)
                line = ax.plot(steps, mean, LINE_STYLES[k % len(LINE_STYLES)], marker="o", markersize=3, label=method)[0]
                ax.fill_between(steps, mean - se, mean + se, color=line.get_color(), alpha=0.2, linewidth=0)
            ax.set_title(f"{network}: {label}", fontsize="medium")
            ax.set_xlabel("environment steps")
    axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    figure.suptitle(f"{setting}: plasticity over training (mean ± se over seeds)")
    figure.tight_layout()
    written += _save(figure, out, f"{stem}_plasticity_evolution", formats)
    plt.close(figure)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="sweep root (searched recursively for run directories)")
    parser.add_argument("--out", help="output directory (default ROOT/plots)")
    parser.add_argument("--methods", help="comma list of methods to draw (default: all found)")
    parser.add_argument("--formats", default="png,pdf", help="comma list of file formats (default png,pdf)")
    parser.add_argument("--bootstrap-reps", type=int, default=summarize.BOOTSTRAP_REPS,
                        help=f"bootstrap resamples of the performance profiles' intervals (default {summarize.BOOTSTRAP_REPS})")  # fmt: skip
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="seed of that resampling (default 0)")
    parser.add_argument("--split-by-config", action="store_true",
                        help="draw each group of runs whose flags differ as its own method (as summarize.py's)")
    args = parser.parse_args(argv)
    if args.bootstrap_reps < 1:
        print("error: --bootstrap-reps must be >= 1", file=sys.stderr)
        return 2
    if not os.path.isdir(args.root):
        print(f"error: {args.root} is not a directory", file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unsupported = [f for f in formats if f not in ("png", "pdf", "svg")]
    if unsupported or not formats:
        print(f"error: --formats {args.formats!r}: choose from png, pdf, svg", file=sys.stderr)
        return 2
    out = args.out or os.path.join(args.root, "plots")
    os.makedirs(out, exist_ok=True)

    runs = summarize.load_runs(args.root)
    if args.methods:
        keep = {m.strip() for m in args.methods.split(",")}
        runs = [r for r in runs if r.method in keep]
    # the runs of one curve are of one configuration only (summarize.py's check and message)
    conflicts = [] if args.split_by_config else summarize.config_conflicts(runs)
    if conflicts:
        print(summarize.config_error(conflicts), file=sys.stderr)
        return 2
    groups, left_out = summarize.group_runs(runs, split_by_config=args.split_by_config)
    for run in left_out:
        print(f"left out: {run.run_dir}: {'; '.join(run.problems)}", file=sys.stderr)
    if not groups:
        print(f"error: no complete runs under {args.root}", file=sys.stderr)
        return 1
    means = [abs(r.aulc) for cell in groups.values() for r in cell.values()]
    decimals = 0 if min(means) >= 100 else 2
    status = 0
    for setting in summarize.setting_order(s for s, _ in groups):
        labels = summarize.method_order(m for s, m in groups if s == setting)
        cells = {m: [groups[(setting, m)][seed] for seed in sorted(groups[(setting, m)])] for m in labels}
        try:
            for path in plot_setting(setting, cells, out, formats, decimals, args.bootstrap_reps, args.bootstrap_seed):
                print(path)
        except ValueError as error:
            print(f"error: {setting}: {error}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
