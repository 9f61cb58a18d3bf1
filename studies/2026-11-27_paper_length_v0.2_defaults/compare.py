"""The paper-length tables at v0.2's defaults, beside the old default's and the paper's.

    python studies/2026-11-27_paper_length_v0.2_defaults/compare.py paralysis/Ant/back-one [--up-to STEP] [--plot F.png]
        [--new OUTPUTS --old OUTPUTS] [--seeds 1-5]

Reads SETTING under studies/2026-11-27_paper_length_v0.2_defaults/outputs/ (the new default's runs,
`launch.sh --collect`) and under studies/2026-11-26_paper_length_v0.1_defaults/outputs/ (the old default's,
committed), {PPO,EPPO_ind}/seed<N>/ in each; --new and --old name other outputs (v0.3's:
studies/2026-11-29_paper_length_v0.3_defaults/outputs beside studies/2026-11-27_paper_length_v0.2_defaults/outputs).
Both are cut at the same step: --up-to, or else the last evaluation step that every new-default run has reached (the
header says when runs are unfinished, or when the new default has fewer seeds than the old one's 8 reporting seeds:
no verdict then). --seeds reads only those seeds of the new default (the finished ones while others still run; the
old default's stay all, paired by seed where both have one).
Prints, in Markdown:
1. per method and default: AULC and Final Return (scripts/summarize.py's definitions), mean ± se over seeds, IQM with
   its 95% bootstrap interval, every seed; the paper's one-sided paired t-test of "EPPO_ind > PPO" within each
   default, of "new > old" per method (paired by seed), and, once the runs are complete, the paper's numbers (15
   seeds) with the two-sided Welch test of "our level = the paper's";
2. on Ant, per method and default: each seed's first evaluation step above standing still (its step-0 return) and
   the share of the later evaluations above it;
3. the new default's full report (studies/2026-11-26_paper_length_v0.1_defaults/analyze.py: per task, plasticity at
   every task end).
With --plot: each method's seed-mean curve at both defaults (the old one dashed), the task changes dotted and, on
Ant, the return of standing still.
"""

import argparse
import importlib.util
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
spec = importlib.util.spec_from_file_location("paper_length_analyze",
                                              os.path.join(REPO, "studies", "2026-11-26_paper_length_v0.1_defaults",
                                                           "analyze.py"))
analyze = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analyze)
summarize, runlist = analyze.summarize, analyze.runlist

NEW_OUTPUTS = os.path.join(HERE, "outputs")
OLD_OUTPUTS = os.path.join(REPO, "studies", "2026-11-26_paper_length_v0.1_defaults", "outputs")
DEFAULTS = ("new", "old")


def metrics(runs: dict, up_to: int, steps_per_task: int) -> dict:
    """method -> seed -> (AULC, Final Return over the tasks ended by up_to) of the evaluations up to up_to."""
    tasks_ended = up_to // steps_per_task
    return {method: {seed: (summarize.aulc(analyze.cut(run[1], up_to)),
                            summarize.final_return(analyze.cut(run[1], up_to), steps_per_task, tasks_ended)
                            if tasks_ended else float("nan")) for seed, run in by_seed.items()}
            for method, by_seed in runs.items()}


def print_side_by_side(values: dict, setting, complete: bool, tasks_ended: int) -> None:
    """values: default -> method -> seed -> (AULC, Final Return)."""
    paper = summarize.read_paper_results()
    for index, (name, key) in enumerate((("AULC", "aulc"),
                                         (f"Final Return ({tasks_ended} task ends)", "final_return"))):
        if index == 1 and not tasks_ended:
            break
        print(f"\n#### {name}\n")
        print("| method | default | n | mean ± se | IQM [95% bootstrap] | EPPO_ind > PPO, p | new > old, p | paper "
              "(15 seeds) | ours = paper (Welch), p | per seed |")
        print("|---|---|---:|---|---|---|---|---|---|---|")
        for method in analyze.METHODS:
            for default in DEFAULTS:
                per_seed = {seed: m[index] for seed, m in values[default][method].items()}
                point, low, high = summarize.bootstrap_interval([list(per_seed.values())])
                versus_ppo = "" if method == "PPO" else analyze.p_text(
                    per_seed, {seed: m[index] for seed, m in values[default]["PPO"].items()})
                versus_old = "" if default == "old" else analyze.p_text(
                    per_seed, {seed: m[index] for seed, m in values["old"][method].items()})
                paper_value = paper.get((key, setting, method)) if complete else None
                paper_text = f"{paper_value[0]:,.0f} ± {paper_value[1]:,.0f}" if paper_value else ""
                welch = (f"{analyze.against_paper(list(per_seed.values()), *paper_value):.3f}"
                         if paper_value and len(per_seed) > 1 else "")
                seeds = ", ".join(f"{seed}: {per_seed[seed]:,.0f}" for seed in sorted(per_seed))
                print(f"| {method} | {default} | {len(per_seed)} | {analyze.fmt(list(per_seed.values()))} | "
                      f"{point:,.0f} [{low:,.0f}, {high:,.0f}] | {versus_ppo} | {versus_old} | {paper_text} | "
                      f"{welch} | {seeds} |")


def print_standing_still(loaded: dict, up_to: int) -> None:
    print("\n#### Above the return of standing still (each run's step-0 evaluation)\n")
    print("| method | default | first step above it, per seed | later evaluations above it |")
    print("|---|---|---|---|")
    for method in analyze.METHODS:
        for default in DEFAULTS:
            found = {seed: analyze.standing_still(run[1], up_to)
                     for seed, run in sorted(loaded[default][method].items())}
            firsts = ", ".join(f"{seed}: " + ("never" if first is None else f"{first:,}")
                               for seed, (_, first, _, _) in found.items())
            above, later = sum(f[2] for f in found.values()), sum(f[3] for f in found.values())
            print(f"| {method} | {default} | {firsts} | {above} of {later} ({above / later:.0%}) |")


def plot(loaded: dict, setting, up_to: int, steps_per_task: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(9, 4.5))
    colors = dict(zip(analyze.METHODS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for method in analyze.METHODS:
        for default, style in (("new", "-"), ("old", "--")):
            curves = [analyze.cut(run[1], up_to) for run in loaded[default][method].values()]
            length = min(len(curve) for curve in curves)
            steps = [e.global_step for e in curves[0][:length]]
            mean = np.mean([[e.return_mean for e in curve[:length]] for curve in curves], axis=0)
            axis.plot(steps, mean, color=colors[method], linestyle=style,
                      label=f"{method}, {default} default (n = {len(curves)})")
    if setting.env == "Ant":
        standing = np.mean([run[1][0].return_mean for by_method in loaded.values() for by_seed in by_method.values()
                            for run in by_seed.values()])
        axis.axhline(standing, color="black", linewidth=0.8, linestyle=":", label="standing still (step 0)")
    for boundary in range(steps_per_task, up_to, steps_per_task):
        axis.axvline(boundary, color="gray", linestyle=":", linewidth=0.6)
    axis.set_xlabel("environment steps")
    axis.set_ylabel("evaluation return (seed mean)")
    axis.set_title(f"{setting}: the new default (solid) and the old (dashed), up to step {up_to:,}", fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def report(setting_name: str, new_root: str = NEW_OUTPUTS, old_root: str = OLD_OUTPUTS, up_to=None,
           plot_path=None, seeds=None) -> int:
    setting = runlist.Setting(*setting_name.strip("/").split("/"))
    loaded = {"new": analyze.load(os.path.join(new_root, setting_name), seeds),
              "old": analyze.load(os.path.join(old_root, setting_name))}
    reached = min(run[1][-1].global_step for default in DEFAULTS for by_seed in loaded[default].values()
                  for run in by_seed.values())
    total = max(run[2] * run[3] for by_seed in loaded["new"].values() for run in by_seed.values())
    up_to = reached if up_to is None else up_to
    if up_to > reached:
        print(f"error: --up-to {up_to} is beyond the step every run has reached ({reached})", file=sys.stderr)
        return 2
    if up_to <= 0:  # a run that has only its step-0 evaluation: no curve, no AULC, no "later" evaluations
        print(f"error: nothing to compare at step {up_to}: every run needs an evaluation after step 0 "
              f"(each run's last evaluation: bash studies/2026-11-27_paper_length_v0.2_defaults/launch.sh --status)",
              file=sys.stderr)
        return 2
    steps_per_task = next(iter(loaded["new"]["PPO"].values()))[2]
    complete = up_to == total
    # the reporting seeds are the old default's (1-8): fewer collected at the new default is no verdict either
    new_seeds = min(len(by_seed) for by_seed in loaded["new"].values())
    old_seeds = max(len(by_seed) for by_seed in loaded["old"].values())
    if not complete:
        state = f"UNFINISHED: {up_to // steps_per_task} of {total // steps_per_task} tasks ended; no verdict"
    elif new_seeds < old_seeds:
        state = f"every collected run complete, but only {new_seeds} of the {old_seeds} seeds; no verdict"
    else:
        state = "every run complete"
    print(f"### {setting}, the new default beside the old: cut at step {up_to:,} of {total:,} per seed ({state})")
    values = {default: metrics(loaded[default], up_to, steps_per_task) for default in DEFAULTS}
    print_side_by_side(values, setting, complete, up_to // steps_per_task)
    if setting.env == "Ant":
        print_standing_still(loaded, up_to)
    if plot_path:
        plot(loaded, setting, up_to, steps_per_task, plot_path)
    print("\n### The new default alone (studies/2026-11-26_paper_length_v0.1_defaults/analyze.py)\n")
    return analyze.report(os.path.join(new_root, setting_name), up_to, seeds=seeds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting", help="e.g. paralysis/Ant/back-one")
    parser.add_argument("--up-to", type=int, help="cut every run at this step (default: the common last step)")
    parser.add_argument("--plot", help="also draw both defaults' seed-mean curves into this image file")
    parser.add_argument("--new", default=NEW_OUTPUTS,
                        help="the new default's outputs (studies/2026-11-29_paper_length_v0.3_defaults: v0.3's "
                             "defaults, beside v0.2's with --old "
                             "studies/2026-11-27_paper_length_v0.2_defaults/outputs)")
    parser.add_argument("--old", default=OLD_OUTPUTS, help="the old default's outputs, paired with --new by seed")
    parser.add_argument("--seeds", help="only these seeds of the new default, e.g. 1-5 (the finished ones while others "
                        "still run)")
    args = parser.parse_args(argv)
    try:
        seeds = None if args.seeds is None else runlist.parse_seeds(args.seeds)
    except runlist.RunListError as error:
        parser.error(f"argument --seeds: {error}")
    return report(args.setting, args.new, args.old, args.up_to, args.plot, seeds)


if __name__ == "__main__":
    sys.exit(main())
