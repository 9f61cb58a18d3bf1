"""The HalfCheetah check: does a candidate default break HalfCheetah? Our PPO on the stationary HalfCheetah-v5,
1 M steps, seeds 1001-1003, each configuration (a row of configs.tsv) beside today's default (`ours`), from the
outputs that collect.py copied into studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_outputs/:

    SCREEN_ENV=HalfCheetah-v5 ANT_WALK_ROOT=/work/ant_walk_halfcheetah \\
        bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/screen.sh 1000000 ours NAME
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/collect.py --root /work/ant_walk_halfcheetah \\
        --outputs studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_outputs --sb3-root ""
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_check.py \\
        > studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_check.md
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_check.py \\
        --plot studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_check.png

Per configuration: the evaluation return (10 deterministic episodes) at 250k, 500k and 1 M, mean ± standard error,
each seed's at 1 M, and against `ours` on the same seeds the paired one-sided t-test (the paper's test) of "lower
than ours at 1 M" (scipy.stats.ttest_rel, alternative="less"): a small p says the configuration breaks HalfCheetah.
"""

import argparse
import glob
import os
import textwrap

import numpy as np
from scipy import stats

import analyze

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUTS = os.path.join(HERE, "halfcheetah_outputs")
STEPS = 1_000_000
BASELINE = "ours"


def evaluation_rows(outputs: str, name: str) -> dict:
    """{seed: its evaluation rows} of one configuration's 1 M-step runs."""
    runs = sorted(glob.glob(os.path.join(outputs, str(STEPS), name, "seed*")))
    return {int(os.path.basename(r)[4:]): analyze.read_rows(os.path.join(r, "evaluations.csv")) for r in runs}


def paired_less(candidate: dict, baseline: dict) -> tuple:
    """The paired one-sided t-test of candidate < baseline over the seeds both have: (seeds, mean difference, p)."""
    seeds = sorted(set(candidate) & set(baseline))
    if len(seeds) < 2:
        return seeds, None, None
    differences = [candidate[s] - baseline[s] for s in seeds]
    if np.std(differences) == 0:  # t undefined; no evidence either way beyond the mean
        return seeds, float(np.mean(differences)), None
    return seeds, float(np.mean(differences)), float(stats.ttest_rel([candidate[s] for s in seeds],
                                                                     [baseline[s] for s in seeds],
                                                                     alternative="less").pvalue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", default=OUTPUTS)
    parser.add_argument("--plot", help="write the seed-mean curves (return, episode length, std) to this PNG instead")
    args = parser.parse_args()
    flags = analyze.config_flags()
    names = [n for n in flags if glob.glob(os.path.join(args.outputs, str(STEPS), n, "seed*"))]
    if args.plot:
        analyze.plot([(name, flags[name], {int(os.path.basename(r)[4:]): r for r in
                                           sorted(glob.glob(os.path.join(args.outputs, str(STEPS), name, "seed*")))})
                      for name in names], None, args.plot)
        return
    runs = {name: evaluation_rows(args.outputs, name) for name in names}
    finals = {name: {seed: analyze.at_step(rows, STEPS) for seed, rows in seeds.items()}
              for name, seeds in runs.items()}
    finals = {name: {seed: v for seed, v in values.items() if v is not None} for name, values in finals.items()}
    print("### Item 3's check: stationary HalfCheetah-v5, 1 M steps, seeds 1001-1003 (grid-search seeds)\n")
    note = ("Made by `python studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_check.py` from "
            "`studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_outputs/`. Return: the "
            "evaluation at that step (10 deterministic episodes), mean ± se over the seeds that reached it. Against "
            f"`{BASELINE}`: the seed-paired difference at 1 M and the paired one-sided t-test of \"lower than "
            f"`{BASELINE}`\".")
    print(textwrap.fill(note, 120, break_long_words=False, break_on_hyphens=False) + "\n")  # Markdown lines <= 120
    print("| configuration | seeds | steps done | return 250k | return 500k | return 1M | per seed at 1M | "
          f"difference from {BASELINE} at 1M | p (lower) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        seeds = runs[name]
        steps_done = min(int(rows[-1]["global_step"]) for rows in seeds.values())
        returns = [analyze.mean_se([analyze.at_step(rows, m) for rows in seeds.values()]) for m in analyze.MILESTONES]
        per_seed = ", ".join(f"{finals[name][s]:,.0f}" for s in sorted(finals[name])) or "–"
        compared, difference, p = (paired_less(finals[name], finals[BASELINE])
                                   if name != BASELINE and BASELINE in finals else ([], None, None))
        print(f"| {name} | {len(seeds)} | {steps_done:,} | " + " | ".join(returns) + f" | {per_seed} | "
              + ("–" if difference is None else f"{difference:+,.0f} ({len(compared)} seeds)") + " | "
              + ("–" if p is None else f"{p:.2f}") + " |")
    print("\n| configuration | flags |\n|---|---|")
    for name in names:
        print(f"| {name} | {'`' + flags[name] + '`' if flags[name].startswith('--') else flags[name]} |")


if __name__ == "__main__":
    main()
