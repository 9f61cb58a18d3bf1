"""How often one state's UCB bonus holds a whole rollout's advantage spread, per task.

    python studies/2026-11-29_paper_length_v0.3_defaults/swamping.py paralysis/Ant/back-one [--outputs DIR] \\
        [--seeds 1-5]

Reads each EPPO_ind seed's scalars.csv.gz under DIR/SETTING/EPPO_ind/ (launch.sh --collect; DIR defaults to this
study's outputs/; --seeds: only those seeds, e.g. the finished ones while others still run). Per update,
evidential/advantage_max_z is the largest |A| of the rollout's UCB advantages once normalized (Algorithm 1, line 19)
over its N = num_steps x num_envs samples; the normalized batch's squares sum to N - 1, so z^2 / (N - 1) is the share
of the batch's spread held by that one state. Where it is at least SWAMPED, the policy step learns mostly from one
state (the bonus of collapsed evidence there). Prints, per task, mean ± se over
seeds: the median z, the share of updates where one state holds at least half the spread, and the median of the
rollout's largest var[V] (evidential/value_var_max). The measure and SWAMPED were fixed on 2026-11-29 at 07:20 UTC,
before any run of item 4 had logged advantage_max_z.
"""

import argparse
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "2026-11-29_eppo_ind_gap_on_ant"))  # its scalars.py
import scalars  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
from scripts import runlist  # noqa: E402

SWAMPED = 0.5  # one state holds at least half of the normalized batch's sum of squares


def per_seed(run_dir: str) -> dict:
    """{task: (median z, share of updates swamped, median largest var[V])} of one seed's updates, and its last
    logged step under "last_step"."""
    with open(os.path.join(run_dir, "config.json")) as f:
        args = json.load(f)["args"]
    samples, steps_per_task = args["num_steps"] * args["num_envs"], args["steps_per_task"]
    logged = scalars.read_csv(os.path.join(run_dir, "scalars.csv.gz"))
    by_task = {}
    for (tag, step), value in sorted(logged.items()):
        if tag in ("evidential/advantage_max_z", "evidential/value_var_max"):
            by_task.setdefault((step - 1) // steps_per_task, {}).setdefault(tag, []).append(value)
    found = {"last_step": max((step for tag, step in logged), default=0)}
    for task, tags in sorted(by_task.items()):
        z = np.array(tags.get("evidential/advantage_max_z", []))
        if len(z):
            found[task] = (float(np.median(z)), float(np.mean(z ** 2 / (samples - 1) >= SWAMPED)),
                           float(np.median(tags.get("evidential/value_var_max", [np.nan]))))
    return found


def report(setting: str, outputs: str, only_seeds=None) -> int:
    runs = sorted(os.path.dirname(path) for path in glob.glob(os.path.join(outputs, setting, "EPPO_ind", "seed*",
                                                                           "scalars.csv.gz")))
    if only_seeds is not None:
        runs = [run for run in runs if os.path.basename(run) in {f"seed{seed}" for seed in only_seeds}]
    if not runs:
        print(f"error: no EPPO_ind/seed<k>/scalars.csv.gz under {os.path.join(outputs, setting)}"
              + ("" if only_seeds is None else f" for seeds {','.join(map(str, only_seeds))}") + " "
              "(bash studies/2026-11-29_paper_length_v0.3_defaults/launch.sh --collect)", file=sys.stderr)
        return 2
    seeds = {os.path.basename(run): per_seed(run) for run in runs}
    last = min(found.pop("last_step") for found in seeds.values())
    tasks = sorted({task for found in seeds.values() for task in found})
    print(f"### {setting}, EPPO_ind: one state's share of the normalized advantages ({len(seeds)} seeds: "
          f"{', '.join(s[len('seed'):] for s in seeds)}; every seed's updates up to step {last:,} at least)\n")
    print(f"| task | seeds | median largest z | updates where one state holds ≥ {SWAMPED:.0%} of the spread | "
          "median largest var[V] |")
    print("|---|---|---|---|---|")
    for task in tasks:
        rows = np.array([found[task] for found in seeds.values() if task in found])
        cells = []
        for column, form in ((0, "{:.1f}"), (1, "{:.1%}"), (2, "{:.3g}")):
            values = rows[:, column]
            se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
            cells.append(f"{form.format(values.mean())} ± {form.format(se)}")
        print(f"| {task} | {len(rows)} | " + " | ".join(cells) + " |")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting", help="e.g. paralysis/Ant/back-one")
    parser.add_argument("--outputs", default=os.path.join(HERE, "outputs"), help="the collected outputs")
    parser.add_argument("--seeds", help="only these seeds, e.g. 1-5 (the finished ones while others still run)")
    args = parser.parse_args(argv)
    try:
        seeds = None if args.seeds is None else runlist.parse_seeds(args.seeds)
    except runlist.RunListError as error:
        parser.error(f"argument --seeds: {error}")
    return report(args.setting.strip("/"), args.outputs, seeds)


if __name__ == "__main__":
    sys.exit(main())
