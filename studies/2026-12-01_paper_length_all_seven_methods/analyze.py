"""The paper's Table 3 on one setting, all seven methods, from the runs' small outputs (README.md's commands).

    python studies/2026-12-01_paper_length_all_seven_methods/analyze.py paralysis/Ant/back-one [--plot F.png] [--cost]

Reads SETTING's runs, METHOD/seed<N>/ (config.json, evaluations.csv, plasticity.csv, summary.json), under each root
of ROOTS: this study's outputs (PFO, CB, PPO_DRND, EPPO_mean, EPPO_cor; `launch.sh --collect`) and
studies/2026-11-29_paper_length_v0.3_defaults/outputs (PPO and EPPO_ind, which main still produces bit for bit:
README.md). A method is read from the first root that has it. Only finished runs count (summary.json and every
evaluation); the header lists each method's seeds and its runs' commit, and a table with fewer than the 8 reporting
seeds of any method says it is interim (no verdict). Prints, in Markdown:
1. AULC and Final Return (scripts/summarize.py's definitions) in the paper's layout, one column per method: mean ±
   se over seeds; the best mean in bold; underlined, a method the paper's test (one-sided paired t-test of the best
   against it, its appendix "Statistical significance") cannot tell from the best (p >= 0.05); then the paper's mean
   ± se over 15 seeds, the two-sided Welch p of "ours = the paper's" and the level it gives (README: at, below,
   above);
2. per task, AULC (the evaluations that measure the task), bold the best of each task;
3. the paper's plasticity statistic: effective rank, stable rank and dormant units of the critic and of the actor,
   each run's average over its task ends, mean ± se over seeds; and per metric and network the lower-triangular
   matrix of its significance figure: the one-sided paired p that the row method is better than the column method
   (higher ranks, fewer dormant units);
4. with every method at 8 seeds, the reading written before the results (README.md), applied: on Ant, where the gap
   is; on HalfCheetah, whether the paper's ordering holds, pair by pair (the EPPO variants above PPO, PFO, CB and
   PPO_DRND; those three level with PPO);
5. with --cost: steps/s and core-hours per method from each run's summary.json.
With --plot: each method's seed-mean learning curve with its standard error band, the task changes dotted.
"""

import argparse
import importlib.util
import json
import math
import os
import sys
import textwrap

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
spec = importlib.util.spec_from_file_location("paper_length_analyze",
                                              os.path.join(REPO, "studies", "2026-11-26_paper_length_v0.1_defaults",
                                                           "analyze.py"))
paper_length = importlib.util.module_from_spec(spec)
spec.loader.exec_module(paper_length)
summarize, runlist = paper_length.summarize, paper_length.runlist

METHODS = tuple(runlist.METHODS)  # the paper's column order: PPO, PFO, CB, PPO_DRND, EPPO_mean, EPPO_cor, EPPO_ind
ROOTS = (os.path.join(HERE, "outputs"),
         os.path.join(REPO, "studies", "2026-11-29_paper_length_v0.3_defaults", "outputs"))
REPORTING_SEEDS = 8
PAPER_SEEDS = paper_length.PAPER_SEEDS
ALPHA = summarize.SIGNIFICANCE_LEVEL
NETWORKS = ("critic", "actor")
HIGHER_IS_BETTER = {"effective_rank": True, "stable_rank": True, "dormant_percent": False}
BASELINES = ("PFO", "CB", "PPO_DRND")  # the three that are not EPPO (the reading's patterns)
EPPO_VARIANTS = ("EPPO_mean", "EPPO_cor", "EPPO_ind")


def load(setting, roots=ROOTS) -> dict:
    """method -> seed -> (run_dir, evaluations, config, summary) of the finished runs; each method from the first
    root that has its directory."""
    runs = {}
    for method in METHODS:
        directory = next((os.path.join(root, str(setting), method) for root in roots
                          if os.path.isdir(os.path.join(root, str(setting), method))), None)
        for name in sorted(os.listdir(directory)) if directory else []:
            run = summarize.load_run(os.path.join(directory, name))
            if not run.complete or not os.path.exists(os.path.join(run.run_dir, "summary.json")):
                continue
            with open(os.path.join(run.run_dir, "config.json")) as f:
                config = json.load(f)
            with open(os.path.join(run.run_dir, "summary.json")) as f:
                summary = json.load(f)
            runs.setdefault(method, {})[run.seed] = (run, config, summary)
    return runs


def level(p: float, ours: float, paper: float) -> str:
    """The README's reading of one method against the paper: at its level unless Welch's p < ALPHA."""
    return "at" if p >= ALPHA else ("below" if ours < paper else "above")


def bold_underline(values: dict) -> dict:
    """method -> (mean ± se text, bold, underlined) for {method: {seed: value}}, as the paper marks its tables."""
    cells = {method: summarize.Cell(dict(by_seed)) for method, by_seed in values.items() if by_seed}
    if cells:
        summarize.mark_significance(cells)
    return {method: (paper_length.fmt(list(cell.values.values())), cell.best, cell.not_worse)
            for method, cell in cells.items()}


def marked(text: str, best: bool, underlined: bool) -> str:
    return f"**{text}**" if best else f"<u>{text}</u>" if underlined else text


def metric_values(runs: dict, metric: str) -> dict:
    return {method: {seed: getattr(run, metric) for seed, (run, _, _) in by_seed.items()}
            for method, by_seed in runs.items()}


def print_main_table(runs: dict, setting) -> dict:
    """Returns method -> (Welch p, level) of AULC, for the reading."""
    paper = summarize.read_paper_results()
    methods = [m for m in METHODS if m in runs]
    levels = {}
    print("| | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * len(methods))
    for metric, label in (("aulc", "AULC"), ("final_return", "Final Return")):
        values = metric_values(runs, metric)
        shown = bold_underline(values)
        print(f"| {label}, ours | " + " | ".join(marked(*shown[m]) for m in methods) + " |")
        print(f"| seeds | " + " | ".join(str(len(values[m])) for m in methods) + " |")
        row_paper, row_p, row_level = [], [], []
        for method in methods:
            if (metric, setting, method) not in paper or len(values[method]) < 2:
                row_paper.append("—"), row_p.append("—"), row_level.append("—")
                continue
            mean, se = paper[(metric, setting, method)]
            ours = list(values[method].values())
            p = paper_length.against_paper(ours, mean, se)
            row_paper.append(f"{mean:,.0f} ± {se:,.0f}")
            row_p.append(f"{p:.3f}")
            row_level.append(level(p, float(np.mean(ours)), mean))
            if metric == "aulc":
                levels[method] = (p, row_level[-1])
        print(f"| {label}, the paper (15 seeds) | " + " | ".join(row_paper) + " |")
        print(f"| Welch p, ours = the paper's | " + " | ".join(row_p) + " |")
        print(f"| level | " + " | ".join(row_level) + " |")
    print("\n" + wrap("Bold: the highest mean. Underlined: not significantly below it (one-sided paired t-test of the "
                      f"best against it, p >= {ALPHA}). Level: the two-sided Welch test of our seeds against the "
                      f"paper's 15 seeds, 'at' when p >= {ALPHA}."))
    return levels


def wrap(text: str) -> str:
    """A paragraph of the tables as lines of at most 120 characters (what the repository's Markdown keeps to)."""
    return textwrap.fill(text, 120, break_long_words=False, break_on_hyphens=False)


def print_per_task(runs: dict, setting) -> None:
    methods = [m for m in METHODS if m in runs]
    any_run = next(iter(next(iter(runs.values())).values()))[0]
    print("| task | parameter | " + " | ".join(methods) + " |")
    print("|---|---|" + "---|" * len(methods))
    for task in range(any_run.num_tasks):
        values = {m: {seed: paper_length.task_aulcs(run.evaluations, run.steps_per_task,
                                                    run.evaluations[-1].global_step)[task]
                      for seed, (run, _, _) in runs[m].items()} for m in methods}
        shown = bold_underline(values)
        print(f"| {task} | {paper_length.setting_parameter(setting, task)} | "
              + " | ".join(marked(*shown[m]) for m in methods) + " |")


def plasticity_values(runs: dict, network: str, metric: str) -> dict:
    """method -> seed -> the metric averaged over the run's task ends (the paper's statistic)."""
    return {method: {seed: paper_length.average_over_task_ends(
        paper_length.plasticity_at_task_ends(run.run_dir, run.evaluations[-1].global_step), network, metric)
        for seed, (run, _, _) in by_seed.items()} for method, by_seed in runs.items()}


def lower_triangle(values: dict, higher_is_better: bool) -> list:
    """Rows of the significance figure: for each row method i and column method j < i, the one-sided paired p
    that i is better than j (higher, or lower for dormant units)."""
    methods = [m for m in METHODS if m in values]
    sign = 1.0 if higher_is_better else -1.0
    rows = []
    for i, row in enumerate(methods):
        cells = []
        for column in methods[:i]:
            p, _ = summarize.paired_pvalue({s: sign * v for s, v in values[row].items()},
                                           {s: sign * v for s, v in values[column].items()})
            cells.append(p)
        rows.append((row, cells))
    return rows


def print_plasticity(runs: dict) -> None:
    methods = [m for m in METHODS if m in runs]
    print("| network | metric | " + " | ".join(methods) + " |")
    print("|---|---|" + "---|" * len(methods))
    for network in NETWORKS:
        for metric in HIGHER_IS_BETTER:
            values = plasticity_values(runs, network, metric)
            print(f"| {network} | {metric} | "
                  + " | ".join("{:.1f} ± {:.1f}".format(*summarize.mean_se(values[m].values())) for m in methods)
                  + " |")
    for network in NETWORKS:
        for metric, higher in HIGHER_IS_BETTER.items():
            values = plasticity_values(runs, network, metric)
            print(f"\n{network}, {metric} ({'higher' if higher else 'lower'} is better): p of row better than column\n")
            print("| | " + " | ".join(methods[:-1]) + " |")
            print("|---|" + "---|" * (len(methods) - 1))
            for row, cells in lower_triangle(values, higher):
                print(f"| {row} | " + " | ".join(f"{p:.3f}" for p in cells) + " |" * (len(methods) - 1 - len(cells))
                      + " |" if cells else f"| {row} |" + " |" * (len(methods) - 1))


def paired_two_sided(a: dict, b: dict) -> float:
    """The two-sided form of the paper's paired test over the seeds both have ("level with": p >= ALPHA)."""
    better, _ = summarize.paired_pvalue(a, b)
    worse, _ = summarize.paired_pvalue(b, a)
    return min(1.0, 2 * min(better, worse))


def reading(levels: dict, runs: dict) -> str:
    """README's reading, applied in its order (Ant, every method at 8 seeds): where the gap is."""
    aulc = metric_values(runs, "aulc")
    at_or_above = [m for m in BASELINES if levels[m][1] in ("at", "above")]
    below = [m for m in BASELINES if levels[m][1] == "below"]
    if len(at_or_above) >= 2:
        within = ("the bonus (EPPO_mean at its level, EPPO_cor and EPPO_ind below)"
                  if levels["EPPO_mean"][1] != "below" and "below" in (levels["EPPO_cor"][1], levels["EPPO_ind"][1])
                  else "the evidential critic (EPPO_mean below too)" if levels["EPPO_mean"][1] == "below"
                  else "neither split (no EPPO variant below)")
        return f"1, in our EPPO: {', '.join(at_or_above)} at or above the paper's level; within EPPO, {within}"

    level_with_ppo = [m for m in below if paired_two_sided(aulc[m], aulc["PPO"]) >= ALPHA]
    if len(level_with_ppo) >= 2:
        return f"2, in the paper's PPO: {', '.join(level_with_ppo)} below the paper's level and level with our PPO"
    differing = [m for m in below if paired_two_sided(aulc[m], aulc["PPO"]) < ALPHA]
    if len(below) >= 2 and len(differing) >= 2:
        return (f"3, in the pipeline every method shares: {', '.join(differing)} below the paper's level and apart "
                "from our PPO")
    return "4, mixed: no place is named; read method by method"


def ordering(runs: dict) -> list:
    """README's HalfCheetah reading, written before the results: whether the paper's ordering holds, pair by pair.
    Each EPPO variant above PPO and above each of PFO, CB and PPO_DRND (the paper's one-sided paired test of AULC,
    p < ALPHA), and each of those three level with PPO (its two-sided form, p >= ALPHA). Returns (claim, test, p,
    holds) in that order."""
    aulc = metric_values(runs, "aulc")
    rows = []
    for variant in EPPO_VARIANTS:
        for other in ("PPO",) + BASELINES:
            p, _ = summarize.paired_pvalue(aulc[variant], aulc[other])
            rows.append((f"{variant} above {other}", "one-sided", p, p < ALPHA))
    for baseline in BASELINES:
        p = paired_two_sided(aulc[baseline], aulc["PPO"])
        rows.append((f"{baseline} level with PPO", "two-sided", p, p >= ALPHA))
    return rows


def print_ordering(runs: dict) -> None:
    rows = ordering(runs)
    print("| the paper's ordering, AULC | paired test | p | holds |")
    print("|---|---|---|---|")
    for claim, test, p, holds in rows:
        print(f"| {claim} | {test} | {p:.3f} | {'yes' if holds else 'no'} |")
    print("\n" + wrap(f"The paper's ordering holds in {sum(h for *_, h in rows)} of its {len(rows)} pairs: "
                      + "; ".join(claim for claim, *_, holds in rows if holds) + "."))


def print_cost(runs: dict) -> None:
    """Steps/s per seed and per process, and core-hours per seed (each process used one core: --torch-threads 1,
    one simulation thread), from summary.json."""
    print("| method | seeds | seeds per process | steps/s per process (training) | core-hours per seed |")
    print("|---|---|---|---|---|")
    for method in [m for m in METHODS if m in runs]:
        summaries = [summary for _, _, summary in runs[method].values()]
        per_process = [s["group_train_sps"] for s in summaries]
        core_hours = [s["wall_time_s"] / s["num_seeds"] / 3600 for s in summaries]
        print(f"| {method} | {len(summaries)} | {sorted({s['num_seeds'] for s in summaries})} | "
              f"{np.mean(per_process):,.0f} | {np.mean(core_hours):.2f} |")


def plot(runs: dict, setting, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 4.5))
    for method in [m for m in METHODS if m in runs]:
        curves = [[e.return_mean for e in run.evaluations] for run, _, _ in runs[method].values()]
        steps = np.array([e.global_step for e in next(iter(runs[method].values()))[0].evaluations]) / 1e6
        curves = np.array(curves)
        mean = curves.mean(0)
        se = curves.std(0, ddof=1) / math.sqrt(len(curves)) if len(curves) > 1 else np.zeros_like(mean)
        ax.plot(steps, mean, label=f"{method} ({len(curves)})", lw=1.4)
        ax.fill_between(steps, mean - se, mean + se, alpha=0.15)
    run = next(iter(next(iter(runs.values())).values()))[0]
    for task in range(1, run.num_tasks):
        ax.axvline(task * run.steps_per_task / 1e6, color="grey", ls=":", lw=0.8)
    ax.set(xlabel="environment steps (M)", ylabel="evaluation return (10 episodes)",
           title=f"{setting}: seed mean ± se (seeds in parentheses)")
    ax.legend(ncol=4, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(setting_name: str, roots=ROOTS, plot_path=None, cost=False) -> int:
    setting = summarize.runlist.Setting(*setting_name.split("/"))
    runs = load(setting, roots)
    if not runs:
        print(f"error: no finished runs of {setting_name} under {', '.join(roots)}", file=sys.stderr)
        return 2
    counts = {m: len(runs.get(m, {})) for m in METHODS}
    interim = any(n < REPORTING_SEEDS for n in counts.values())
    print(f"# {setting_name}: the paper's seven methods, 9 × 500k steps\n")
    for method in METHODS:
        if method in runs:
            commits = sorted({(config.get("git_commit") or "?")[:7] for _, config, _ in runs[method].values()})
            print(f"- {method}: seeds {sorted(runs[method])}, commit {', '.join(commits)}")
        else:
            print(f"- {method}: no finished run yet")
    if interim:
        print("\n**Interim**: not every method has its 8 seeds; no verdict is drawn from these tables.")
    print("\n## AULC and Final Return\n")
    levels = print_main_table(runs, setting)
    print("\n## AULC per task\n")
    print_per_task(runs, setting)
    print("\n## Plasticity: each run's average over its task ends\n")
    print_plasticity(runs)
    if setting.env == "Ant" and not interim and all(m in levels for m in METHODS):
        print(f"\n## The reading (README.md, written before the results)\n\n{reading(levels, runs)}")
    if setting.env == "HalfCheetah" and not interim and all(m in runs for m in METHODS):
        print("\n## The paper's ordering (README.md's reading of HalfCheetah, written before the results)\n")
        print_ordering(runs)
    if cost:
        print("\n## Cost (summary.json)\n")
        print_cost(runs)
    if plot_path:
        plot(runs, setting, plot_path)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting", help="experiment/env/strategy, e.g. paralysis/Ant/back-one")
    parser.add_argument("--roots", nargs="+", default=list(ROOTS), help="outputs folders, searched in order")
    parser.add_argument("--plot", help="write the learning curves here")
    parser.add_argument("--cost", action="store_true", help="add steps/s and core-hours per method")
    options = parser.parse_args(argv)
    if options.setting.count("/") != 2:
        parser.error("setting must be experiment/env/strategy, e.g. paralysis/Ant/back-one")
    return report(options.setting, options.roots, options.plot, options.cost)


if __name__ == "__main__":
    sys.exit(main())
