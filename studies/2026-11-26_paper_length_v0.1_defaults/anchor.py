"""The stationary anchor of the paper-length study at v0.1's defaults: how far our PPO gets on the unchanged Ant-v5 in
2M steps.

    python studies/2026-11-26_paper_length_v0.1_defaults/anchor.py \\
        studies/2026-11-26_paper_length_v0.1_defaults/outputs/none/Ant/PPO \\
        [--paralysis studies/2026-11-26_paper_length_v0.1_defaults/outputs/paralysis/Ant/back-one/PPO] \\
        [--plot F.png] [--milestone 500000] \\
        [--beside studies/2026-11-26_paper_length_v0.1_defaults/outputs/paralysis/Ant/back-one/PPO \\
                  studies/2026-11-26_paper_length_v0.1_defaults/outputs/paralysis/...]

Reads ANCHOR_DIR/seed<N>/ (config.json, evaluations.csv; copied there by `launch.sh --collect`): PPO runs with
`--experiment none` and the paper's settings otherwise. Every run is cut at the last evaluation step every run has
reached; the header says whether that is the end. Prints, in Markdown:
1. per seed and as mean ± se over seeds: the step-0 evaluation (standing still: the untrained policy keeps the robot
   upright and still), the evaluation every --milestone steps (500k: the paper's task length), the mean over all
   evaluations (the AULC of a one-task run), the best later evaluation, and when and how often a later evaluation
   is above standing still;
2. with --paralysis (the PPO runs of the paralysis study): paralysis task 0 is the intact robot, so the anchor's
   first --milestone steps are the same training as the study's task 0 and must give the same evaluations, bit for
   bit (same seed, same code; the runs batch different seeds together, which must not matter). Per seed:
   "identical" with the number of evaluations compared, or the first step at which they differ;
3. with --beside (other runs, e.g. the paralysis study's PPO and EPPO_ind): the anchor's mean ± se row, and each
   of those runs' over the same seeds and the same steps, so the intact robot and the paralysed one are read side
   by side.
With --plot: every seed's curve (thin), the mean (thick) and the seeds' mean step-0 return (dashed), and each
--beside directory's mean over the same seeds (thick, dotted). A directory without runs, or a --beside directory
without one of the anchor's seeds at the anchor's last step: a one-line error, exit 2, before any table.
"""

import argparse
import csv
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import analyze  # noqa: E402  (the paralysis study's tables: its standing-still statistic)
from scripts import summarize  # noqa: E402

MILESTONE = 500_000  # the paper's task length: the return at each multiple of it


def load(directory: str) -> dict:
    """seed -> (run_dir, evaluations) of every seed<N> run under ``directory`` that has evaluated at least once."""
    runs = {}
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        run_dir = os.path.join(directory, name)
        if os.path.exists(os.path.join(run_dir, "evaluations.csv")):
            with open(os.path.join(run_dir, "config.json")) as f:
                seed = json.load(f)["args"]["seed"]
            evaluations = summarize.read_evaluations(os.path.join(run_dir, "evaluations.csv"))
            if evaluations:
                runs[seed] = (run_dir, evaluations)
    if not runs:
        raise SystemExit(f"error: no run with evaluations under {directory}/seed<N>/")
    return dict(sorted(runs.items()))


def seed_row(evaluations: list, milestones: list) -> dict:
    """The numbers of one seed's row (evaluations already cut)."""
    by_step = {e.global_step: e.return_mean for e in evaluations}
    standing, first_above, above, later = analyze.standing_still(evaluations, evaluations[-1].global_step)
    best = max((e for e in evaluations if e.global_step > 0), key=lambda e: e.return_mean)
    return {"standing": standing, "milestones": [by_step[step] for step in milestones],
            "aulc": float(np.mean([e.return_mean for e in evaluations])), "best": (best.return_mean, best.global_step),
            "first_above": first_above, "above": above, "later": later}


def evaluation_rows(run_dir: str, up_to: int) -> list:
    """The rows of the run's evaluations.csv up to ``up_to``, every field as written."""
    with open(os.path.join(run_dir, "evaluations.csv"), newline="") as f:
        return [row for row in csv.DictReader(f) if int(row["global_step"]) <= up_to]


def compare(anchor_dir: str, paralysis_dir: str, up_to: int) -> str:
    """'identical (n evaluations)' when both runs' evaluations up to ``up_to`` are equal in every field as written
    (return mean, std, min and max, episodes); 'identical so far' while the anchor has not reached ``up_to`` yet and
    all it has evaluated is; else the first step at which they differ."""
    first, second = evaluation_rows(anchor_dir, up_to), evaluation_rows(paralysis_dir, up_to)
    for a, b in zip(first, second):
        if a != b:
            return f"differs from step {int(a['global_step']):,}"
    if first and len(first) < len(second) and int(first[-1]["global_step"]) < up_to == int(second[-1]["global_step"]):
        # the anchor is still running: what it has evaluated so far is compared, and said to be a part
        return f"identical so far ({len(first)} evaluations, up to step {int(first[-1]['global_step']):,})"
    if len(first) != len(second):
        return f"differs: {len(first)} vs {len(second)} evaluations"
    return f"identical ({len(first)} evaluations)"


def label(directory: str) -> str:
    """A --beside directory's name in the tables: its path below outputs/ (e.g. paralysis/Ant/back-one/PPO)."""
    parts = os.path.normpath(directory).split(os.sep)
    return "/".join(parts[len(parts) - parts[::-1].index("outputs"):]) if "outputs" in parts else directory


def beside_runs(directory: str, seeds: list, up_to: int) -> dict:
    """seed -> evaluations up to ``up_to`` of the --beside runs in ``directory`` with the anchor's seeds; every one
    must exist and have reached ``up_to``, or the comparison would not be over the same seeds and steps."""
    loaded = load(directory)
    missing = [seed for seed in seeds if seed not in loaded or loaded[seed][1][-1].global_step < up_to]
    if missing:
        raise SystemExit(f"error: --beside {directory}: seeds {missing} missing or not at step {up_to:,}")
    return {seed: [e for e in loaded[seed][1] if e.global_step <= up_to] for seed in seeds}


def report(anchor_dir: str, paralysis_dir=None, plot_path=None, milestone: int = MILESTONE, beside=()) -> int:
    loaded = load(anchor_dir)
    with open(os.path.join(next(iter(loaded.values()))[0], "config.json")) as f:
        config = json.load(f)
    total = config["args"]["steps_per_task"] * config["num_tasks"]
    up_to = min(evaluations[-1].global_step for _, evaluations in loaded.values())
    runs = {seed: [e for e in evaluations if e.global_step <= up_to] for seed, (_, evaluations) in loaded.items()}
    milestones = list(range(milestone, up_to + 1, milestone))
    others = {label(directory): beside_runs(directory, list(runs), up_to) for directory in beside}  # before printing
    print(f"### {config['args']['env_id']}, stationary, our PPO: cut at step {up_to:,} of {total:,} per seed "
          + ("(every run complete)" if up_to == total else "(UNFINISHED)"))

    def line(cells) -> str:
        """One Markdown table row (no empty cell where no milestone has been reached yet)."""
        return "|" + "|".join(f" {cell} " if cell else " " for cell in cells) + "|"

    def column(values) -> str:
        return "{:,.0f} ± {:,.0f}".format(*summarize.mean_se(values))

    at = [f"at {m:,}" for m in milestones]
    print("\n" + line(["seed", "step 0 (standing still)", *at, "mean over all evaluations",
                       "best evaluation after step 0 (step)", "first step above standing still",
                       "later evaluations above it"]))
    print("|---:|" + "---:|" * (len(milestones) + 5))
    rows = {seed: seed_row(evaluations, milestones) for seed, evaluations in runs.items()}
    for seed, row in rows.items():
        first = "never" if row["first_above"] is None else f"{row['first_above']:,}"
        print(line([str(seed), f"{row['standing']:,.0f}", *(f"{v:,.0f}" for v in row["milestones"]),
                    f"{row['aulc']:,.0f}", f"{row['best'][0]:,.0f} ({row['best'][1]:,})", first,
                    f"{row['above']} of {row['later']}"]))

    def milestone_columns(table: dict) -> list:
        return [column([r["milestones"][i] for r in table.values()]) for i in range(len(milestones))]

    print(line([f"mean ± se ({len(rows)} seeds)", column([r["standing"] for r in rows.values()]),
                *milestone_columns(rows), column([r["aulc"] for r in rows.values()]),
                column([r["best"][0] for r in rows.values()]), "",
                f"{sum(r['above'] for r in rows.values())} of {sum(r['later'] for r in rows.values())}"]))

    if paralysis_dir:
        study = load(paralysis_dir)
        print(f"\n#### The first {milestone:,} steps against the paralysis study's task 0 (the intact robot)\n")
        print(f"| seed | evaluations up to step {milestone:,} |")
        print("|---:|---|")
        for seed, (run_dir, _) in loaded.items():
            verdict = compare(run_dir, study[seed][0], milestone) if seed in study else "no paralysis run"
            print(f"| {seed} | {verdict} |")

    if others:
        print(f"\n#### Beside it: the same seeds ({', '.join(map(str, runs))}) over the same steps, mean ± se\n")
        print(line(["runs", *at, f"mean over the evaluations up to {up_to:,}"]))
        print("|---|" + "---|" * (len(milestones) + 1))
        for name, table in [(f"the anchor ({label(anchor_dir)})", rows)] + [
                (name, {seed: seed_row(evaluations, milestones) for seed, evaluations in other.items()})
                for name, other in others.items()]:
            print(line([name, *milestone_columns(table), column([r["aulc"] for r in table.values()])]))

    if plot_path:
        plot(runs, plot_path, f"{config['args']['env_id']}, stationary, our PPO: every seed (thin) and the mean "
                              f"(thick); dashed: standing still (step 0)", others)
    return 0


def plot(runs: dict, path: str, title: str, others=None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    steps = [e.global_step for e in min(runs.values(), key=len)]
    for seed, evaluations in runs.items():
        ax.plot([e.global_step for e in evaluations], [e.return_mean for e in evaluations], lw=0.7, alpha=0.6,
                label=f"seed {seed}")
    mean = np.mean([[e.return_mean for e in evaluations[:len(steps)]] for evaluations in runs.values()], axis=0)
    ax.plot(steps, mean, lw=2.5, color="black", label="mean")
    colors = ["darkred", "darkblue", "darkgreen", "darkmagenta"]  # apart from the seeds' colours
    for i, (name, other) in enumerate((others or {}).items()):
        ax.plot(steps, np.mean([[e.return_mean for e in evaluations[:len(steps)]] for evaluations in other.values()],
                               axis=0), lw=2.5, ls=":", color=colors[i % len(colors)], label=f"{name} (mean)")
    ax.axhline(np.mean([evaluations[0].return_mean for evaluations in runs.values()]), ls="--", color="grey")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return (10 episodes)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}", file=sys.stderr)  # stdout is the tables: `> ant_anchor_tables.md` gives them exactly


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("anchor_dir", help="e.g. studies/2026-11-26_paper_length_v0.1_defaults/outputs/none/Ant/PPO")
    parser.add_argument("--paralysis",
                        help="the paralysis study's PPO runs, to check the first --milestone steps against")
    parser.add_argument("--plot", help="also draw the curves into this image file")
    parser.add_argument("--beside", nargs="+", default=[], metavar="DIR",
                        help="other runs (e.g. the paralysis study's PPO and EPPO_ind) to print, and plot, over the "
                             "anchor's seeds and steps")
    parser.add_argument("--milestone", type=int, default=MILESTONE,
                        help=f"print the return every this many steps; also the steps checked against --paralysis "
                             f"(default {MILESTONE:,}: the paper's task length, paralysis task 0)")
    args = parser.parse_args(argv)
    if args.milestone < 1:
        parser.error(f"--milestone must be >= 1, got {args.milestone}")
    try:
        return report(args.anchor_dir, args.paralysis, args.plot, args.milestone, args.beside)
    except SystemExit as error:  # load()'s and beside_runs()'s messages name the bad directory: exit 2, as argparse
        if not isinstance(error.code, str):
            raise
        print(error.code, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
