"""Every table and figure of the paper-length comparison at v0.1's defaults from the runs' small outputs.

    python studies/2026-11-26_paper_length_v0.1_defaults/analyze.py \\
        studies/2026-11-26_paper_length_v0.1_defaults/outputs/paralysis/Ant/back-one [--seeds 1-5] [--up-to STEP] \\
        [--plot F.png]

Reads SETTING_DIR/{PPO,EPPO_ind}/seed<N>/ (config.json, evaluations.csv, plasticity.csv; copied there by
`launch.sh --collect`). Every run is cut at the same step: --up-to, or else the last evaluation step every run has
reached, so that unfinished runs compare the same stretch of training; the header says which (no verdict is drawn
from unfinished runs: studies/2026-11-26_paper_length_v0.1_defaults/README.md). Prints, in Markdown:
1. AULC and Final Return per method: mean ± standard error over seeds, the paper's one-sided paired t-test over
   seeds both ways, IQM with its 95% bootstrap interval (scripts/summarize.py's estimators), every seed, and the
   paper's numbers beside them (scripts/paper_results.csv) with a two-sided Welch test of "our level = the
   paper's" from its mean ± se over 15 seeds;
2. per task, AULC (the evaluations that measure that task) and the return at the task end (the evaluation at its
   last step; Final Return is their mean): is a lead made in the first task or after each change? Paralysis tasks 0
   and 8 are the intact robot, so task 0 is also a stationary anchor: 500k steps of training from scratch;
3. the plasticity metrics (plasticity.csv) at every task end, both networks, mean ± se over seeds; and the
   paper's statistic (Sec. 4, "Plasticity"): each seed's average over its task ends, mean ± se over seeds, with the
   one-sided paired p of the paper's claim (EPPO_ind's critic has the higher ranks and the fewer dormant units);
4. on Ant, the return of standing still (the step-0 evaluation: an untrained policy keeps the robot upright and
   still, about 990) and, per seed, the first evaluation step above it and how many later evaluations are above it.
With --plot: every seed's curve (thin) and the mean (thick) per method, with the task changes.
"""

import argparse
import csv
import json
import os
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-26_eppo_vs_ppo_short_runs"))
import analyze_long  # noqa: E402
import nonstationary_envs  # noqa: E402
from scripts import runlist, summarize  # noqa: E402

METHODS = ("PPO", "EPPO_ind")
PLASTICITY_METRICS = ("effective_rank", "stable_rank", "dormant_percent")
# The paper's claim for each metric (Sec. 4): EPPO keeps higher ranks and fewer dormant units than PPO.
EPPO_BETTER_WHEN_HIGHER = {"effective_rank": True, "stable_rank": True, "dormant_percent": False}
PAPER_SEEDS = 15  # the paper's Sec. 4: every number is over 15 seeds


def load(setting_dir: str, seeds=None) -> dict:
    """method -> seed -> (run_dir, evaluations, steps_per_task, num_tasks); only ``seeds`` when given."""
    runs = {}
    for method in METHODS:
        directory = os.path.join(setting_dir, method)
        for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
            run_dir = os.path.join(directory, name)
            if not os.path.exists(os.path.join(run_dir, "evaluations.csv")):
                continue
            with open(os.path.join(run_dir, "config.json")) as f:
                config = json.load(f)
            evaluations = summarize.read_evaluations(os.path.join(run_dir, "evaluations.csv"))
            if evaluations and (seeds is None or config["args"]["seed"] in seeds):
                runs.setdefault(method, {})[config["args"]["seed"]] = (
                    run_dir, evaluations, config["args"]["steps_per_task"], config["num_tasks"])
    missing = [method for method in METHODS if method not in runs]
    if missing:
        raise SystemExit(f"error: {setting_dir} has no runs of {', '.join(missing)}")
    return runs


def cut(evaluations: list, up_to: int) -> list:
    return [e for e in evaluations if e.global_step <= up_to]


def task_aulcs(evaluations: list, steps_per_task: int, up_to: int) -> list:
    """AULC of each task reached: the mean return of the evaluations that measure it (the task column)."""
    tasks = sorted({e.task for e in cut(evaluations, up_to)})
    return [float(np.mean([e.return_mean for e in cut(evaluations, up_to) if e.task == task])) for task in tasks]


def standing_still(evaluations: list, up_to: int) -> tuple:
    """(step-0 return, first step above it or None, number of later evaluations above it, number of later ones)."""
    kept = cut(evaluations, up_to)
    baseline = kept[0].return_mean
    later = [e for e in kept if e.global_step > 0]
    above = [e.global_step for e in later if e.return_mean > baseline]
    return baseline, (above[0] if above else None), len(above), len(later)


def plasticity_at_task_ends(run_dir: str, up_to: int) -> dict:
    """(task end step, network, metric) -> value, step 0 included (the initial networks)."""
    with open(os.path.join(run_dir, "plasticity.csv"), newline="") as f:
        return {(int(row["global_step"]), row["network"], metric): float(row[metric])
                for row in csv.DictReader(f) if int(row["global_step"]) <= up_to for metric in PLASTICITY_METRICS}


def average_over_task_ends(plasticity: dict, network: str, metric: str) -> float:
    """The paper's plasticity statistic for one run: the metric averaged over the task ends (step 0 excluded)."""
    return float(np.mean([value for (step, net, name), value in plasticity.items()
                          if step > 0 and net == network and name == metric]))


def setting_parameter(setting, task: int) -> str:
    """The task's parameter in words: the paralysed joints' torque scale, or the floor friction."""
    parameter = nonstationary_envs.task_schedule(runlist.ENV_IDS[setting.env], setting.experiment,
                                                 setting.strategy)[task]
    if setting.experiment == "paralysis":
        return f"{min(parameter):g}"
    return "" if parameter is None else f"{parameter:g}"


def against_paper(values: list, paper_mean: float, paper_se: float, paper_seeds: int = PAPER_SEEDS) -> float:
    """Two-sided Welch t-test of our seeds' mean against the paper's mean ± se over its seeds: do the two
    implementations reach the same level? (Not paired: the seeds are not the same runs.)"""
    sd = float(np.std(values, ddof=1))
    return float(stats.ttest_ind_from_stats(float(np.mean(values)), sd, len(values), paper_mean,
                                            paper_se * np.sqrt(paper_seeds), paper_seeds, equal_var=False).pvalue)


def fmt(values) -> str:
    mean, se = summarize.mean_se(values)
    return f"{mean:,.0f} ± {se:,.0f}" if len(values) > 1 else f"{mean:,.0f}"


def p_text(better: dict, worse: dict) -> str:
    p, n = summarize.paired_pvalue(better, worse)
    return f"{p:.3f} (n {n})"


def print_metrics(runs: dict, setting, up_to: int, steps_per_task: int, tasks_ended: int) -> None:
    """AULC and Final Return per method, beside the paper's."""
    metrics = {method: {seed: (summarize.aulc(cut(run[1], up_to)),
                               summarize.final_return(cut(run[1], up_to), steps_per_task, tasks_ended)
                               if tasks_ended else float("nan"))
                        for seed, run in by_seed.items()} for method, by_seed in runs.items()}
    paper = summarize.read_paper_results()
    for index, (name, paper_key) in enumerate((("AULC", "aulc"),
                                               (f"Final Return ({tasks_ended} task ends)", "final_return"))):
        if index == 1 and not tasks_ended:
            break
        print(f"\n#### {name}\n")
        print("| method | n | mean ± se | IQM [95% bootstrap] | p (> the other, one-sided paired) | paper (15 seeds) "
              "| p (ours = the paper's, Welch, two-sided) | per seed |")
        print("|---|---:|---|---|---|---|---|---|")
        for method, other in zip(METHODS, reversed(METHODS)):
            values = {seed: m[index] for seed, m in metrics[method].items()}
            others = {seed: m[index] for seed, m in metrics[other].items()}
            point, low, high = summarize.bootstrap_interval([list(values.values())])
            paper_value = paper.get((paper_key, setting, method))
            paper_text = f"{paper_value[0]:,.0f} ± {paper_value[1]:,.0f}" if paper_value else ""
            welch = (f"{against_paper(list(values.values()), *paper_value):.3f}" if paper_value and len(values) > 1
                     else "")
            seeds = ", ".join(f"{seed}: {values[seed]:,.0f}" for seed in sorted(values))
            print(f"| {method} | {len(values)} | {fmt(list(values.values()))} | {point:,.0f} [{low:,.0f}, {high:,.0f}] "
                  f"| {p_text(values, others)} | {paper_text} | {welch} | {seeds} |")


def print_per_task(runs: dict, setting, up_to: int, steps_per_task: int, tasks_ended: int) -> None:
    """Per task: AULC and the return at the task end, with the task's parameter."""
    parameter_name = "torque" if setting.experiment == "paralysis" else "friction"
    print("\n#### Per task: AULC and the return at the task end (mean ± se over seeds; p: EPPO_ind > PPO, one-sided "
          "paired" + ("; torque: the paralysed joints' scale, 1 = the intact robot, so task 0 is stationary training "
                      "from scratch)\n" if parameter_name == "torque" else "; friction: the floor's)\n"))
    per_task = {method: {seed: task_aulcs(run[1], steps_per_task, up_to) for seed, run in by_seed.items()}
                for method, by_seed in runs.items()}
    at_end = {method: {seed: summarize.task_end_returns(run[1], steps_per_task, tasks_ended)
                       for seed, run in by_seed.items()} for method, by_seed in runs.items()}
    num_tasks = min(len(values) for by_seed in per_task.values() for values in by_seed.values())
    print(f"| task | {parameter_name} | " + " | ".join(f"{m} AULC" for m in METHODS) + " | p | "
          + " | ".join(f"{m} at the end" for m in METHODS) + " | p |")
    print("|---:|---:|" + "---|" * (2 * len(METHODS) + 2))
    for task in range(num_tasks):
        row = f"| {task} | {setting_parameter(setting, task)} |"
        for table in (per_task, at_end):
            if table is at_end and task >= tasks_ended:
                row += " |" * (len(METHODS) + 1)  # an unfinished task has no end yet
                continue
            cells = {method: {seed: values[task] for seed, values in table[method].items()} for method in METHODS}
            row += " " + " | ".join(fmt(list(cells[m].values())) for m in METHODS) \
                + f" | {p_text(cells['EPPO_ind'], cells['PPO'])} |"
        print(row)


def print_plasticity(runs: dict, up_to: int, tasks_ended: int) -> None:
    """The plasticity metrics at every task end, and the paper's statistic (their average over the task ends)."""
    print("\n#### Plasticity at every task end (mean ± se over seeds; step 0: the initial networks)\n")
    plasticity = {method: {seed: plasticity_at_task_ends(run[0], up_to) for seed, run in by_seed.items()}
                  for method, by_seed in runs.items()}
    values = {method: list(by_seed.values()) for method, by_seed in plasticity.items()}
    ends = sorted({key[0] for per_run in values.values() for run in per_run for key in run})
    print("| step | network | " + " | ".join(f"{m} {metric}" for metric in PLASTICITY_METRICS for m in METHODS) + " |")
    print("|---:|---|" + "---|" * (len(METHODS) * len(PLASTICITY_METRICS)))
    for step in ends:
        for network in ("critic", "actor"):
            row = []
            for metric in PLASTICITY_METRICS:
                for method in METHODS:
                    found = [run[(step, network, metric)] for run in values[method] if (step, network, metric) in run]
                    mean, se = summarize.mean_se(found) if found else (float("nan"), float("nan"))
                    row.append(f"{mean:.1f} ± {se:.1f}")
            print(f"| {step:,} | {network} | " + " | ".join(row) + " |")

    if tasks_ended:  # the paper's statistic needs at least one task end
        print("\n#### Plasticity, the paper's statistic: each seed's average over its task ends (mean ± se over seeds; "
              "p: the paper's claim, EPPO_ind's ranks higher and its dormant units fewer, one-sided paired)\n")
        print("| network | metric | " + " | ".join(METHODS) + " | p |")
        print("|---|---|" + "---|" * (len(METHODS) + 1))
        for network in ("critic", "actor"):
            for metric in PLASTICITY_METRICS:
                averages = {method: {seed: average_over_task_ends(run, network, metric)
                                     for seed, run in by_seed.items()}
                            for method, by_seed in plasticity.items()}
                # the test's H1 is "first > second": EPPO_ind > PPO for the ranks, PPO > EPPO_ind for the dormant units
                first, second = ("EPPO_ind", "PPO") if EPPO_BETTER_WHEN_HIGHER[metric] else ("PPO", "EPPO_ind")
                cells = ["{:.1f} ± {:.1f}".format(*summarize.mean_se(list(averages[m].values()))) for m in METHODS]
                print(f"| {network} | {metric} | " + " | ".join(cells)
                      + f" | {p_text(averages[first], averages[second])} |")


def print_standing_still(runs: dict, up_to: int) -> None:
    """On Ant: the step-0 return (standing still) and, per seed, when and how often the return gets above it."""
    print("\n#### Above the return of standing still (the step-0 evaluation)\n")
    print("| method | seed | step-0 return | first step above it | later evaluations above it |")
    print("|---|---:|---:|---:|---:|")
    for method, by_seed in runs.items():
        for seed, run in sorted(by_seed.items()):
            baseline, first, above, later = standing_still(run[1], up_to)
            print(f"| {method} | {seed} | {baseline:,.0f} | {'never' if first is None else f'{first:,}'} "
                  f"| {above} of {later}" + (f" ({above / later:.0%}) |" if later else " |"))


def report(setting_dir: str, up_to=None, plot_path=None, seeds=None) -> int:
    runs = load(setting_dir, seeds)
    reached = min(run[1][-1].global_step for by_seed in runs.values() for run in by_seed.values())
    total = max(run[2] * run[3] for by_seed in runs.values() for run in by_seed.values())
    up_to = reached if up_to is None else up_to
    if up_to > reached:
        raise SystemExit(f"error: --up-to {up_to} is beyond the step every run has reached ({reached})")
    steps_per_task = next(iter(runs["PPO"].values()))[2]
    tasks_ended = up_to // steps_per_task
    parts = os.path.normpath(setting_dir).split(os.sep)[-3:]
    setting = runlist.Setting(*parts)
    unfinished = f"(UNFINISHED: {tasks_ended} of {total // steps_per_task} tasks ended; no verdict)"
    print(f"### {setting}: cut at step {up_to:,} of {total:,} per seed "
          + ("(every run complete)" if up_to == total else unfinished))

    print_metrics(runs, setting, up_to, steps_per_task, tasks_ended)
    print_per_task(runs, setting, up_to, steps_per_task, tasks_ended)
    print_plasticity(runs, up_to, tasks_ended)
    if setting.env == "Ant":  # a HalfCheetah cannot fall: its step-0 return is about 0, no level to clear
        print_standing_still(runs, up_to)

    if plot_path:
        # the study's figure: every seed thin, the mean thick, the task changes dotted
        analyze_long.plot(runs, up_to, plot_path,
                          f"{setting}: every seed (thin) and the mean (thick), up to step {up_to:,}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting_dir",
                        help="e.g. studies/2026-11-26_paper_length_v0.1_defaults/outputs/paralysis/Ant/back-one")
    parser.add_argument("--up-to", type=int, help="cut every run at this step (default: the common last step)")
    parser.add_argument("--plot", help="also draw the curves into this image file")
    parser.add_argument("--seeds", help="only these seeds, e.g. 1-5 (the finished ones while others still run)")
    args = parser.parse_args(argv)
    try:
        seeds = None if args.seeds is None else runlist.parse_seeds(args.seeds)
    except runlist.RunListError as error:
        parser.error(f"argument --seeds: {error}")
    return report(args.setting_dir, args.up_to, args.plot, seeds)


if __name__ == "__main__":
    sys.exit(main())
