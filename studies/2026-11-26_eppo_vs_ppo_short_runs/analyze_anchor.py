"""Sanity anchor of our PPO baseline: stationary HalfCheetah-v5, 1M steps, beside CleanRL's published figure.

Usage: python studies/2026-11-26_eppo_vs_ppo_short_runs/analyze_anchor.py \\
           studies/2026-11-26_eppo_vs_ppo_short_runs/anchor/PPO
Reads <root>/seed<N>/ (evaluations.csv and the TensorBoard events) and prints Markdown, per seed and as mean ± se:
- the training return the way CleanRL reports it: `charts/episodic_return` (stochastic policy, raw reward) of the
  episodes that end in the last TRAILING_STEPS environment steps (CleanRL: 1 env x 2048 steps per iteration, so
  the last 10 of its 488 iterations);
- the last evaluation (deterministic policy, 10 episodes; our `eval/` metric).
"""

import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from scripts import summarize  # noqa: E402

TRAILING_STEPS = 10 * 2048
# CleanRL's ppo_continuous_action.py on HalfCheetah-v4, 1M steps (its documentation's benchmark table).
CLEANRL_HALFCHEETAH = "1442.64 ± 46.03"


def training_returns(run_dir: str) -> list:
    """(step, return) of every training episode logged under charts/episodic_return."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    accumulator.Reload()
    return [(event.step, event.value) for event in accumulator.Scalars("charts/episodic_return")]


def main(root: str) -> None:
    rows = []
    for name in sorted(os.listdir(root), key=lambda n: int(n[len("seed"):])):
        run_dir = os.path.join(root, name)
        with open(os.path.join(run_dir, "evaluations.csv"), newline="") as f:
            evaluations = list(csv.DictReader(f))
        episodes = training_returns(run_dir)
        last_step = int(evaluations[-1]["global_step"])
        trailing = [value for step, value in episodes if step > last_step - TRAILING_STEPS]
        rows.append((name, last_step, float(np.mean(trailing)), len(trailing), float(evaluations[-1]["return_mean"])))
    print("| seed | steps | training return, last 20,480 steps (episodes) | last evaluation (10 episodes) |")
    print("|---|---:|---|---|")
    for name, steps, train, count, evaluation in rows:
        print(f"| {name[len('seed'):]} | {steps} | {train:.1f} ({count}) | {evaluation:.1f} |")
    train_mean, train_se = summarize.mean_se(np.array([row[2] for row in rows]))
    eval_mean, eval_se = summarize.mean_se(np.array([row[4] for row in rows]))
    print(f"| mean ± se ({len(rows)} seeds) | | {train_mean:.1f} ± {train_se:.1f} | {eval_mean:.1f} ± {eval_se:.1f} |")
    print(f"| CleanRL, HalfCheetah-v4, 1M steps | | {CLEANRL_HALFCHEETAH} | |")


if __name__ == "__main__":
    main(sys.argv[1])
