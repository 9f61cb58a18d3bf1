"""Learning curves and plasticity figures of a sweep (the paper's Appendix figures), PNG and PDF.

    python scripts/plot_curves.py runs/sweep [more roots] [--out runs/sweep/plots] [--methods PPO,EPPO_cor]
    python scripts/plot_curves.py runs/sweep --paper-layout     # the curves as one figure of the paper's width

Each figure is titled in words ("HalfCheetah-v5, paralysis back-one (8 seeds)"), each method keeps one colour in
every figure (the paper's colours for its seven methods), and its legend sits below the axes. Per setting
(experiment/env/strategy):
- <out>/<experiment>_<env>_<strategy>_curves.{png,pdf}: mean evaluation return over seeds vs environment
  steps with a shaded one-standard-error band, a line at each task change and each task's label above the axes
  (the torque of the paralysed joints, or the floor friction), and legend entries "method: AULC mean ± se,
  Final Return mean ± se" (the paper's legend order); with --paper-layout the figure is 7 inches wide (a page's
  text width), its fonts the paper's size, and its legend inside the axes;
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
Only complete runs are drawn (the runs scripts/summarize.py puts in its tables); others are listed. Below 5
seeds per method the profile figure says that its intervals mean little there. Each PNG carries its title and
task labels as text (metadata "Title" and "Description"), which tests/tools/test_plot.py reads back.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys

import numpy as np

if __package__:  # imported as scripts.plot_curves
    from . import runlist, summarize
else:  # run as python scripts/plot_curves.py
    import runlist
    import summarize

PLASTICITY_METRICS = {"effective_rank": "effective rank", "stable_rank": "stable rank",
                      "dormant_percent": "dormant units (%)"}
LINE_STYLES = ["--", ":", "-.", "-"]
# The paper's colours of its methods (eppo-paper.tex's \definecolor lines; CB has none there, so matplotlib's
# brown); other methods take OTHER_COLORS in turn.
METHOD_COLORS = {"PPO": "#1F77B4", "EPPO_cor": "#FF7F0E", "PFO": "#2CA02C", "EPPO_ind": "#D62728",
                 "EPPO_mean": "#9467BD", "PPO_DRND": "#17BECF", "CB": "#8C564B"}
OTHER_COLORS = ["#7F7F7F", "#BCBD22", "#E377C2", "#000000"]
EXPERIMENT_WORDS = {"none": "stationary"}  # a setting's experiment as a title says it
PAPER_LAYOUT = {"figsize": (7.0, 2.9), "fontsize": 8}  # one figure across a page's text width (0.98\textwidth)


def method_colors(methods) -> dict[str, str]:
    """One colour per method, the same in every figure: the paper's for its methods, then OTHER_COLORS in order."""
    methods = list(methods)
    others = iter(OTHER_COLORS * (1 + len(methods)))
    return {m: METHOD_COLORS[m] if m in METHOD_COLORS else next(others) for m in methods}


def seeds_words(counts) -> str:
    """'8 seeds', or '5-8 seeds' when methods have different numbers."""
    low, high = min(counts), max(counts)
    return f"{low} seed{'s' if low != 1 else ''}" if low == high else f"{low}-{high} seeds"


def setting_title(setting, counts=None) -> str:
    """A setting in words, e.g. 'HalfCheetah-v5, paralysis back-one (8 seeds)'."""
    env = runlist.ENV_IDS.get(setting.env, setting.env)
    words = EXPERIMENT_WORDS.get(setting.experiment, f"{setting.experiment} {setting.strategy}")
    return f"{env}, {words}" + (f" ({seeds_words(counts)})" if counts else "")


def task_labels(experiment: str, schedule: list) -> tuple[str, list[str]]:
    """(what varies, one label per task) from config.json's schedule: paralysis -> the torque scale of the
    paralysed joints (the lowest scale of the task's tuple; 1 = intact), slippery -> the floor friction."""
    if experiment == "paralysis":
        scales = [min(float(x) for x in str(task).strip("()[] ").split(",")) for task in schedule]
        return "torque of the paralysed joints", [f"{s:g}" for s in scales]
    if experiment == "slippery":
        return "floor friction", [f"{float(task):g}" for task in schedule]
    return "", []


def run_task_labels(run: summarize.RunRecord) -> tuple[str, list[str]]:
    """task_labels of a run's config.json (its first num_tasks tasks); ('', []) when it has no schedule."""
    try:
        with open(os.path.join(run.run_dir, "config.json")) as f:
            schedule = json.load(f).get("schedule") or []
        what, labels = task_labels(run.setting.experiment, schedule)
    except (OSError, ValueError):
        return "", []
    return what, labels[: run.num_tasks]


def steps_formatter(largest: float):
    """Tick labels of environment steps: 0, 0.5M, 1M ... (or 10k, 20k ...) instead of an offset like '1e6'."""
    from matplotlib.ticker import FuncFormatter

    scale, unit = (1e6, "M") if largest >= 1e6 else (1e3, "k") if largest >= 1e4 else (1, "")
    return FuncFormatter(lambda x, _: "0" if x == 0 else f"{x / scale:g}{unit}")


def mark_tasks(ax, run: summarize.RunRecord, labelsize=None) -> list[str]:
    """A line at each task change and, above the axes, each task's label at its middle (a second x axis titled
    with what varies); returns the labels drawn."""
    for i in range(1, run.num_tasks):
        ax.axvline(i * run.steps_per_task, color="0.45", linestyle="-", linewidth=0.6, zorder=0)
    what, labels = run_task_labels(run)
    if len(labels) != run.num_tasks or run.num_tasks < 2:
        return []
    top = ax.secondary_xaxis("top")
    top.set_xticks([(i + 0.5) * run.steps_per_task for i in range(run.num_tasks)], labels)
    top.tick_params(length=0, labelsize=labelsize or "small")
    top.set_xlabel(f"task: {what}", fontsize=labelsize or "small")
    return labels


def _metadata(title: str, labels: list[str]) -> dict:
    return {"Title": title, "Description": "tasks: " + ", ".join(labels) if labels else "tasks: none"}


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
    return (f"{method}: {n(aulc_mean, decimals)} ± {n(aulc_se, decimals)}, "
            f"{n(final_mean, decimals)} ± {n(final_se, decimals)}")


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


def _save(figure, out: str, stem: str, formats: list[str], metadata: dict | None = None) -> list[str]:
    """The figure in each format; PNG carries `metadata` (Title, Description: the task labels) as text, PDF as its
    Title and Subject (PDF has no Description), SVG none."""
    paths = []
    for extension in formats:
        path = os.path.join(out, f"{stem}.{extension}")
        keep = dict(metadata or {}) if extension == "png" else {}
        if extension == "pdf" and metadata:
            keep = {"Title": metadata.get("Title", ""), "Subject": metadata.get("Description", "")}
        figure.savefig(path, bbox_inches="tight", dpi=150, metadata=keep or None)
        paths.append(path)
    return paths


def _legend_below(ax, columns: int, **kwargs):
    """The legend under the axes (and under their x label), in `columns` columns: the axes keep their width."""
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=columns, frameon=False, **kwargs)


def plot_seeds(setting, cells: dict[str, list[summarize.RunRecord]], out: str, formats: list[str]) -> list[str]:
    """<stem>_seeds: one panel per method, every seed's learning curve as a thin line (its seed number at its
    end) beside the mean over seeds (thick): shows what a mean hides, e.g. seeds split into two modes."""
    import matplotlib.pyplot as plt

    columns = min(len(cells), 4)
    rows = -(-len(cells) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.0 * rows + 0.6), sharey=True, squeeze=False)
    any_run = next(iter(cells.values()))[0]
    colors = method_colors(cells)
    for ax in axes.flat[len(cells):]:
        ax.set_visible(False)
    for k, (method, runs) in enumerate(cells.items()):
        ax, color = axes.flat[k], colors[method]
        for i in range(1, any_run.num_tasks):
            ax.axvline(i * any_run.steps_per_task, color="0.45", linestyle="-", linewidth=0.6, zorder=0)
        steps, returns = seed_curves(runs)
        for run, curve in zip(runs, returns):
            ax.plot(steps, curve, color=color, linewidth=0.7, alpha=0.45)
            ax.annotate(str(run.seed), (steps[-1], curve[-1]), xytext=(2, 0), textcoords="offset points", fontsize=6,
                        color=color, va="center")
        ax.plot(steps, returns.mean(axis=0), color=color, linewidth=2.2, label="mean")
        ax.set(title=f"{method} ({seeds_words([len(runs)])})", xlabel="environment steps")
        ax.xaxis.set_major_formatter(steps_formatter(steps[-1]))
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("evaluation return")
    title = f"{setting_title(setting)}: every seed (thin, its number at its end) and the mean (thick)"
    figure.suptitle(title)
    figure.tight_layout()
    written = _save(figure, out, f"{setting.experiment}_{setting.env}_{setting.strategy}_seeds", formats,
                    {"Title": title})
    plt.close(figure)
    return written


def plot_profiles(setting, cells: dict[str, list[summarize.RunRecord]], out: str, formats: list[str], reps: int,
                  seed: int) -> list[str]:
    """<stem>_profile: performance profiles (Agarwal et al. 2021): per metric, the fraction of a method's runs
    whose AULC (Final Return) is > tau, against tau, with a 95% bootstrap interval over the seeds."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(summarize.METRICS), figsize=(5.2 * len(summarize.METRICS), 4.2), squeeze=False)
    colors = method_colors(cells)
    for col, metric in enumerate(summarize.METRICS):
        ax = axes[0][col]
        taus = profile_taus(cells, metric)
        for k, (method, runs) in enumerate(cells.items()):
            fraction, low, high = summarize.performance_profile([[getattr(r, metric) for r in runs]], taus, reps=reps,
                                                                seed=seed)
            ax.plot(taus, fraction, LINE_STYLES[k % len(LINE_STYLES)], color=colors[method], linewidth=1.8,
                    label=f"{method} (n = {len(runs)})")  # fmt: skip
            ax.fill_between(taus, low, high, color=colors[method], alpha=0.12, linewidth=0)
        ax.set(xlabel=f"{summarize.METRIC_LABELS[metric]} threshold τ", ylabel="fraction of runs with score > τ",
               ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, names, loc="lower center", ncol=min(len(names), 4), frameon=False, fontsize="small")
    counts = [len(runs) for runs in cells.values()]
    title = (f"{setting_title(setting, counts)}: performance profiles "
             f"(95% bootstrap intervals over seeds, {reps} resamples)")
    few = summarize.few_seeds_note(counts, "these intervals")
    figure.suptitle(title + (f"\n{few}" if few else ""), fontsize="medium")
    figure.tight_layout(rect=(0, 0.06 * (1 + (len(names) - 1) // 4), 1, 1))
    written = _save(figure, out, f"{setting.experiment}_{setting.env}_{setting.strategy}_profile", formats,
                    {"Title": title, "Description": few or ""})  # fmt: skip
    plt.close(figure)
    return written


def curves_figure(setting, cells: dict[str, list[summarize.RunRecord]], decimals: int, paper_layout: bool = False):
    """(figure, title, task labels) of the learning curves: the mean over seeds with a one-standard-error band per
    method, each task's label above the axes; the legend below the axes, or inside them in the paper's layout."""
    import matplotlib.pyplot as plt

    fontsize = PAPER_LAYOUT["fontsize"] if paper_layout else None
    with plt.rc_context({"font.size": fontsize} if fontsize else {}):
        figure, axes = plt.subplots(figsize=PAPER_LAYOUT["figsize"] if paper_layout else (9, 4.6))
        any_run = next(iter(cells.values()))[0]
        labels = mark_tasks(axes, any_run, labelsize=fontsize - 1 if fontsize else None)
        colors = method_colors(cells)
        for k, (method, runs) in enumerate(cells.items()):
            steps, mean, se = mean_curve(runs)
            axes.plot(steps, mean, LINE_STYLES[k % len(LINE_STYLES)], color=colors[method],
                      linewidth=1.4 if paper_layout else 1.8, label=legend_label(method, runs, decimals))  # fmt: skip
            axes.fill_between(steps, mean - se, mean + se, color=colors[method], alpha=0.2, linewidth=0)
        title = setting_title(setting, [len(runs) for runs in cells.values()])
        axes.set_title(title, fontsize=fontsize + 1 if fontsize else None)
        axes.set(xlabel="environment steps", ylabel="evaluation return",
                 xlim=(0, any_run.num_tasks * any_run.steps_per_task))
        axes.xaxis.set_major_formatter(steps_formatter(any_run.num_tasks * any_run.steps_per_task))
        axes.grid(alpha=0.3)
        legend_title = "AULC, Final Return (mean ± se over seeds)"
        if paper_layout:  # inside, where the curves are not: below them after the first task's rise
            axes.legend(title=legend_title, loc="lower right", ncol=2, fontsize=fontsize - 2,
                        title_fontsize=fontsize - 2, framealpha=0.85, borderaxespad=0.3, handlelength=2.2,
                        columnspacing=1.0)  # fmt: skip
            low, high = axes.get_ylim()
            ticks = [tick for tick in axes.get_yticks() if low <= tick <= high]
            axes.set_ylim(low - 0.45 * (high - low), high)  # room for the legend under the curves
            axes.set_yticks(ticks)  # no ticks in that room, below the data
        else:
            _legend_below(axes, 2, title=legend_title, fontsize="small", title_fontsize="small")
        figure.tight_layout()
    return figure, title, labels


def plot_setting(setting, cells: dict[str, list[summarize.RunRecord]], out: str, formats: list[str], decimals: int,
                 reps: int = summarize.BOOTSTRAP_REPS, seed: int = 0,
                 paper_layout: bool = False) -> list[str]:  # fmt: skip
    import matplotlib.pyplot as plt

    stem = f"{setting.experiment}_{setting.env}_{setting.strategy}"
    written = []
    figure, title, labels = curves_figure(setting, cells, decimals, paper_layout)
    written += _save(figure, out, f"{stem}_curves", formats, _metadata(title, labels))
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
                values = [task_end_plasticity(plasticity[method][r.run_dir], r.steps_per_task, r.num_tasks, network)
                          for r in runs]
                values = [v[metric] for v in values if v is not None]
                if values:
                    data.append(values)
                    names.append(method)
            ax = axes[row_index][col]
            if data:
                # the paper's Appendix box plots: the median black, the mean a red line
                ax.boxplot(data, showmeans=True, meanline=True, medianprops={"color": "black"},
                           meanprops={"color": "red", "linestyle": "-"})  # fmt: skip
                ax.set_xticks(range(1, len(names) + 1), names, rotation=30)
            ax.set_title(f"{network}: {label}", fontsize="medium")
    title = (f"{setting_title(setting)}: plasticity averaged over the task ends "
             "(a box: the seeds; black: median, red: mean)")
    figure.suptitle(title)
    figure.tight_layout()
    written += _save(figure, out, f"{stem}_plasticity_box", formats, {"Title": title})
    plt.close(figure)

    figure, axes = plt.subplots(len(networks), 3, figsize=(12, 3.2 * len(networks)), squeeze=False)
    for row_index, network in enumerate(networks):
        for col, (metric, label) in enumerate(PLASTICITY_METRICS.items()):
            ax = axes[row_index][col]
            colors = method_colors(cells)
            for k, (method, runs) in enumerate(cells.items()):
                series = [[(r["global_step"], r[metric]) for r in plasticity[method][run.run_dir]
                           if r["network"] == network] for run in runs]
                series = [s for s in series if s]
                if not series or len({tuple(step for step, _ in s) for s in series}) != 1:
                    continue  # absent, or runs measured at different steps
                steps = np.array([step for step, _ in series[0]])
                values = np.array([[value for _, value in s] for s in series])
                mean = values.mean(axis=0)
                se = values.std(axis=0, ddof=1) / np.sqrt(len(values)) if len(values) > 1 else np.zeros_like(mean)
                ax.plot(steps, mean, LINE_STYLES[k % len(LINE_STYLES)], color=colors[method], marker="o", markersize=3,
                        label=method)
                ax.fill_between(steps, mean - se, mean + se, color=colors[method], alpha=0.2, linewidth=0)
            ax.set_title(f"{network}: {label}", fontsize="medium")
            ax.set_xlabel("environment steps")
            ax.xaxis.set_major_formatter(steps_formatter(max(r.num_tasks * r.steps_per_task
                                                             for runs in cells.values() for r in runs)))
    handles, names = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, names, loc="lower center", ncol=min(len(names), 7), frameon=False, fontsize="small")
    title = f"{setting_title(setting)}: plasticity over training (mean ± se over seeds)"
    figure.suptitle(title)
    figure.tight_layout(rect=(0, 0.05 * (1 + (len(names) - 1) // 7), 1, 1))
    written += _save(figure, out, f"{stem}_plasticity_evolution", formats, {"Title": title})
    plt.close(figure)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", metavar="root",
                        help="sweep root, searched recursively for run directories; several roots are drawn together")
    parser.add_argument("--out", help="output directory (default ROOT/plots, the first root's)")
    parser.add_argument("--methods", help="comma list of methods to draw (default: all found)")
    parser.add_argument("--formats", default="png,pdf", help="comma list of file formats (default png,pdf)")
    parser.add_argument("--bootstrap-reps", type=int, default=summarize.BOOTSTRAP_REPS,
                        help="bootstrap resamples of the performance profiles' intervals "
                             f"(default {summarize.BOOTSTRAP_REPS})")  # fmt: skip
    parser.add_argument("--bootstrap-seed", type=int, default=0, help="seed of that resampling (default 0)")
    parser.add_argument("--split-by-config", action="store_true",
                        help="draw each group of runs whose flags differ as its own method (as summarize.py's)")
    parser.add_argument("--paper-layout", action="store_true",
                        help="the learning curves as one figure of the paper's width (7 in), its font size, the legend "
                             "inside the axes (the other figures as without it)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.bootstrap_reps < 1:
        print("error: --bootstrap-reps must be >= 1", file=sys.stderr)
        return 2
    for root in args.roots:
        if not os.path.isdir(root):
            print(f"error: {root} is not a directory", file=sys.stderr)
            return 2
    import matplotlib

    matplotlib.use("Agg")
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unsupported = [f for f in formats if f not in ("png", "pdf", "svg")]
    if unsupported or not formats:
        print(f"error: --formats {args.formats!r}: choose from png, pdf, svg", file=sys.stderr)
        return 2
    out = args.out or os.path.join(args.roots[0], "plots")
    os.makedirs(out, exist_ok=True)

    runs = [run for root in args.roots for run in summarize.load_runs(root)]
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
        print(f"error: no complete runs under {', '.join(args.roots)}", file=sys.stderr)
        return 1
    means = [abs(r.aulc) for cell in groups.values() for r in cell.values()]
    decimals = 0 if min(means) >= 100 else 2
    status = 0
    for setting in summarize.setting_order(s for s, _ in groups):
        labels = summarize.method_order(m for s, m in groups if s == setting)
        cells = {m: [groups[(setting, m)][seed] for seed in sorted(groups[(setting, m)])] for m in labels}
        try:
            for path in plot_setting(setting, cells, out, formats, decimals, args.bootstrap_reps, args.bootstrap_seed,
                                     args.paper_layout):  # fmt: skip
                print(path)
        except ValueError as error:
            print(f"error: {setting}: {error}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
