"""The slippery `increasing` study's tables on one setting, from the runs' small outputs (README.md's commands).

    python studies/2026-12-07_slippery_increasing/analyze.py slippery/Ant/increasing \
        [--seeds 1-5] [--cost] [--plot F.png]

Reads SETTING's runs, METHOD/seed<N>/ (config.json, evaluations.csv, plasticity.csv, summary.json), under ROOT (this
study's outputs, `launch.sh --collect`; --root elsewhere). Only finished runs count (summary.json and every
evaluation); --seeds keeps those seeds only (the interim tables: seeds 1-5 of every method). The header lists each
method's seeds, its runs' commit, κ and friction mode (from config.json), and with fewer than 8 seeds of any method
says the tables are interim (no verdict). The tables are those of the all-seven-methods study's analyze.py,
imported (studies/2026-12-01_paper_length_all_seven_methods/analyze.py; its columns are the methods that have runs
here), in Markdown:
1. AULC and Final Return in the paper's layout: mean ± se over seeds, the best in bold, underlined what the paper's
   test (one-sided paired t-test of the best against it) cannot tell from the best; the paper's mean ± se over 15
   seeds, the two-sided Welch p of "ours = the paper's" and the level it gives;
2. each EPPO variant against our PPO, the paper's one-sided test paired by seed, both ways, and the verdict the
   reading defines (above, below, level), for AULC and Final Return;
3. per task: AULC (bold and underlined as in 1), and each EPPO variant's one-sided paired p of "above our PPO";
   on Ant, the AULC of the tasks whose physics are one (floors at or below the body geoms' friction) beside the
   rest's, in words only (README.md: no verdict rests on it);
4. the paper's plasticity statistic (effective rank, stable rank, dormant units of the critic and the actor, each
   run's average over its task ends) with the lower-triangular p matrices of its significance figure;
5. with every method at 8 seeds, the reading (README.md, committed before any run), applied: A and C on HalfCheetah,
   B on Ant;
6. with --cost: steps/s and core-hours per method from each run's summary.json.
With --plot: each method's seed-mean learning curve with its standard error band, the task changes dotted.
"""

import argparse
import importlib.util
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
_spec = importlib.util.spec_from_file_location(
    "all_seven_analyze", os.path.join(REPO, "studies", "2026-12-01_paper_length_all_seven_methods", "analyze.py"))
seven = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seven)
summarize, runlist, paper_length = seven.summarize, seven.runlist, seven.paper_length
sys.path.insert(0, REPO)
import nonstationary_envs  # noqa: E402

METHODS = ("PPO", "EPPO_mean", "EPPO_cor", "EPPO_ind")
EPPO_VARIANTS = METHODS[1:]
ROOT = os.path.join(HERE, "outputs")
SETTINGS = ("slippery/HalfCheetah/increasing", "slippery/Ant/increasing")
REPORTING_SEEDS = 8
ALPHA = summarize.SIGNIFICANCE_LEVEL
# Ant-v5's body geoms have friction 1.0 and MuJoCo takes the larger of two touching geoms' frictions, so every floor
# at or below it gives the same contacts: bit-identical physics (docs/environments.md, `floor` mode).
BODY_FRICTION = {"Ant": 1.0, "HalfCheetah": 0.4}


def load(setting, root: str = ROOT, seeds=None) -> dict:
    """method -> seed -> (run, config, summary) of the finished runs of METHODS, only ``seeds`` when given."""
    kept = {method: {seed: run for seed, run in sorted(by_seed.items()) if seeds is None or seed in seeds}
            for method, by_seed in seven.load(setting, (root,)).items() if method in METHODS}
    return {method: by_seed for method, by_seed in kept.items() if by_seed}


def against_ppo(values: dict) -> dict:
    """variant -> (p above, p below, verdict) for {method: {seed: value}}: the paper's one-sided test paired by seed,
    'the variant is greater' and 'our PPO is greater'; above or below when its p < ALPHA, else level."""
    rows = {}
    for variant in [m for m in EPPO_VARIANTS if m in values and "PPO" in values]:
        above, _ = summarize.paired_pvalue(values[variant], values["PPO"])
        below, _ = summarize.paired_pvalue(values["PPO"], values[variant])
        rows[variant] = (above, below, "above" if above < ALPHA else "below" if below < ALPHA else "level")
    return rows


def print_against_ppo(runs: dict) -> dict:
    """Returns variant -> verdict on AULC, for the reading."""
    verdicts = {}
    print("| against our PPO, paired one-sided p | " + " | ".join(m for m in EPPO_VARIANTS if m in runs) + " |")
    print("|---|" + "---|" * len([m for m in EPPO_VARIANTS if m in runs]))
    for metric, label in (("aulc", "AULC"), ("final_return", "Final Return")):
        rows = against_ppo(seven.metric_values(runs, metric))
        p_values = " | ".join(f"{a:.3f} / {b:.3f}" for a, b, _ in rows.values())
        print(f"| {label}: p (above) / p (below) | {p_values} |")
        print(f"| {label}: verdict | " + " | ".join(v for _, _, v in rows.values()) + " |")
        if metric == "aulc":
            verdicts = {variant: verdict for variant, (_, _, verdict) in rows.items()}
    print(f"\nAbove (below): the paper's one-sided t-test paired by seed, p < {ALPHA} for 'the variant's (our PPO's) "
          "value is greater'; level: neither.")
    return verdicts


def task_values(runs: dict) -> list:
    """Per task, {method: {seed: the task's AULC}} (the evaluations that measure it)."""
    any_run = next(iter(next(iter(runs.values())).values()))[0]
    per_run = {method: {seed: paper_length.task_aulcs(run.evaluations, run.steps_per_task,
                                                      run.evaluations[-1].global_step)
                        for seed, (run, _, _) in by_seed.items()} for method, by_seed in runs.items()}
    return [{method: {seed: tasks[task] for seed, tasks in by_seed.items()} for method, by_seed in per_run.items()}
            for task in range(any_run.num_tasks)]


def one_physics_tasks(setting) -> list:
    """The tasks whose floor is at or below the body geoms' friction: bit-identical physics in `floor` mode."""
    schedule = nonstationary_envs.task_schedule(runlist.ENV_IDS[setting.env], setting.experiment, setting.strategy)
    return [task for task, friction in enumerate(schedule) if friction <= BODY_FRICTION[setting.env]]


def print_per_task_against_ppo(runs: dict, setting) -> None:
    variants = [m for m in EPPO_VARIANTS if m in runs]
    print("| task | friction | " + " | ".join(f"{m} above PPO, p" for m in variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    for task, values in enumerate(task_values(runs)):
        rows = against_ppo(values)
        print(f"| {task} | {paper_length.setting_parameter(setting, task)} | "
              + " | ".join(f"{rows[m][0]:.3f}" for m in variants) + " |")
    print(f"\nThe one-sided paired p of 'the variant's task AULC is greater'; 1 - p is that of 'our PPO's is greater'. "
          "Read per task, not a verdict (the reading rests on the whole run's AULC).")


def print_one_physics_stretch(runs: dict, setting) -> None:
    """AULC of the tasks that share one physics (mean over them per seed) beside the other tasks', per method."""
    per_task = task_values(runs)
    same = [task for task in one_physics_tasks(setting) if task < len(per_task)]
    if len(same) < 2:
        return
    rest = [task for task in range(len(per_task)) if task not in same]
    print(f"\n### Tasks {same[0]}-{same[-1]}, one physics "
          f"(floors up to the body's friction {BODY_FRICTION[setting.env]:g})"
          + (", and the rest\n" if rest else "\n"))
    print("| AULC, mean over the tasks | " + " | ".join(m for m in METHODS if m in runs) + " |")
    print("|---|" + "---|" * len([m for m in METHODS if m in runs]))
    for tasks in (same, rest) if rest else (same,):
        label = f"tasks {tasks[0]}-{tasks[-1]}" if len(tasks) > 1 else f"task {tasks[0]}"
        cells = [paper_length.fmt([float(np.mean([per_task[t][m][seed] for t in tasks])) for seed in runs[m]])
                 for m in METHODS if m in runs]
        print(f"| {label} | " + " | ".join(cells) + " |")


def reading_a(verdicts: dict) -> str:
    """README's question A, slippery HalfCheetah: does the ordering (the bonus variants above our PPO) carry over?"""
    bonus_above = [m for m in ("EPPO_cor", "EPPO_ind") if verdicts[m] == "above"]
    below = [m for m in EPPO_VARIANTS if verdicts[m] == "below"]
    if len(bonus_above) == 2:
        text = ("A1, it carries over: EPPO_cor and EPPO_ind above our PPO; "
                + ("EPPO_mean level with it, back-one's split" if verdicts["EPPO_mean"] == "level"
                   else "EPPO_mean above it too, the critic alone lifts HalfCheetah here"
                   if verdicts["EPPO_mean"] == "above"
                   else "EPPO_mean below it"))
    elif not bonus_above:
        text = "A2, it does not carry over: neither EPPO_cor nor EPPO_ind above our PPO"
    else:
        other = "EPPO_ind" if bonus_above == ["EPPO_cor"] else "EPPO_cor"
        text = f"A3, partly: {bonus_above[0]} above our PPO, {other} {verdicts[other]}"
    return text + (f"; below our PPO: {', '.join(below)}" if below else "")


def reading_b(verdicts: dict, levels: dict) -> str:
    """README's question B, slippery Ant: does 'every EPPO variant lands at our PPO' carry over?"""
    above = [m for m in EPPO_VARIANTS if verdicts[m] == "above"]
    below = [m for m in EPPO_VARIANTS if verdicts[m] == "below"]
    if not above and not below:
        whole = levels["PPO"][1] == "at" and all(levels[m][1] == "below" for m in EPPO_VARIANTS)
        return ("B1, it carries over: all three EPPO variants level with our PPO; "
                + ("with our PPO at the paper's level and the three below theirs, back-one's picture whole" if whole
                   else "our PPO " + levels["PPO"][1] + " the paper's level, the variants "
                   + ", ".join(f"{m} {levels[m][1]}" for m in EPPO_VARIANTS)))
    if above and not below:
        return f"B2, it does not carry over, EPPO helps on Ant here: {', '.join(above)} above our PPO"
    if below and not above:
        return f"B3, it does not carry over, EPPO costs on Ant here: {', '.join(below)} below our PPO"
    return f"B4, mixed: {', '.join(above)} above our PPO, {', '.join(below)} below it"


def reading_c(levels: dict) -> str:
    """README's question C, slippery HalfCheetah: is our PPO above the paper's here too?"""
    p, level = levels["PPO"]
    name = {"above": "C1, above here too", "at": "C2, at the paper's level", "below": "C3, below"}[level]
    return (f"{name}: our PPO {level} the paper's (Welch p {p:.3f}); "
            + ", ".join(f"{m} {levels[m][1]}" for m in EPPO_VARIANTS))


def report(setting_name: str, root: str = ROOT, seeds_spec=None, plot_path=None, cost=False) -> int:
    setting = runlist.Setting(*setting_name.split("/"))
    runs = load(setting, root, None if seeds_spec is None else set(runlist.parse_seeds(seeds_spec)))
    if not runs:
        print(f"error: no finished runs of {setting_name} under {root}", file=sys.stderr)
        return 2
    any_run = next(iter(next(iter(runs.values())).values()))[0]
    interim = any(len(runs.get(m, {})) < REPORTING_SEEDS for m in METHODS)
    print(f"# {setting_name}: PPO and the three EPPO variants, "
          f"{any_run.num_tasks} × {any_run.steps_per_task:,} steps\n")
    for method in METHODS:
        if method not in runs:
            print(f"- {method}: no finished run yet")
            continue
        configs = [config for _, config, _ in runs[method].values()]
        commits = sorted({(config.get("git_commit") or "?")[:7] for config in configs})
        kappas = sorted({f"{config['args']['kappa']:g}" for config in configs if "kappa" in config["args"]})
        modes = sorted({config["args"].get("friction_mode", "?") for config in configs})
        print(f"- {method}: seeds {sorted(runs[method])}, commit {', '.join(commits)}"
              + (f", κ {', '.join(kappas)}" if kappas else "") + f", friction mode {', '.join(modes)}")
    if seeds_spec is not None:
        print(f"\nOnly seeds {seeds_spec} (--seeds), whatever else has finished.")
    if interim:
        print(f"\n**Interim**: not every method has its {REPORTING_SEEDS} seeds; "
              "no verdict is drawn from these tables.")
    print("\n## AULC and Final Return\n")
    levels = seven.print_main_table(runs, setting)
    print("\n## Each EPPO variant against our PPO\n")
    verdicts = print_against_ppo(runs) if "PPO" in runs else {}
    print("\n## AULC per task\n")
    seven.print_per_task(runs, setting)
    if "PPO" in runs:
        print()
        print_per_task_against_ppo(runs, setting)
    print_one_physics_stretch(runs, setting)
    print("\n## Plasticity: each run's average over its task ends\n")
    seven.print_plasticity(runs)
    if not interim:
        print("\n## The reading (README.md, committed before any run), applied\n")
        if setting.env == "HalfCheetah":
            print(f"{reading_a(verdicts)}.\n\n{reading_c(levels)}.")
        else:
            print(f"{reading_b(verdicts, levels)}.")
    if cost:
        print("\n## Cost (summary.json)\n")
        seven.print_cost(runs)
    if plot_path:
        seven.plot(runs, setting, plot_path)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting", help=" or ".join(SETTINGS))
    parser.add_argument("--root", default=ROOT, help="the outputs folder (default: the study's outputs/)")
    parser.add_argument("--seeds", help="only these seeds, e.g. 1-5 (the interim tables)")
    parser.add_argument("--plot", help="write the learning curves here")
    parser.add_argument("--cost", action="store_true", help="add steps/s and core-hours per method")
    options = parser.parse_args(argv)
    if options.setting not in SETTINGS:
        parser.error(f"argument setting: {options.setting!r} is not one of this study's settings; choose one of "
                     + ", ".join(SETTINGS))
    try:
        if options.seeds is not None:
            runlist.parse_seeds(options.seeds)
    except runlist.RunListError as error:
        parser.error(f"argument --seeds: {error}")
    return report(options.setting, options.root, options.seeds, options.plot, options.cost)


if __name__ == "__main__":
    sys.exit(main())
