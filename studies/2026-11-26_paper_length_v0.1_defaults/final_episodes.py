"""The final policies of a setting's runs on their last task, episode by episode: returns and episode lengths.

    python studies/2026-11-26_paper_length_v0.1_defaults/final_episodes.py \\
        /work/paper_length/runs/paralysis/Ant/back-one

Reads SETTING_DIR/<method>/seed<N>/ (config.json and the final checkpoint.pt, which `launch.sh --collect` does not
copy: this needs the run directories themselves) and evaluates each run's final policy on its last task with
scripts/evaluate.py's `evaluate_run`: the paper's protocol (deterministic mean action, frozen normalization, env i
seeded seed + 100 + i, the run's --eval-episodes and --torch-threads). That is the run's last evaluation again, so
the table also checks that it reproduces exactly; what it adds is the spread over episodes and the episode lengths
(an Ant episode ends early when the robot falls). Prints one Markdown row per run, the step-0 evaluation (the
untrained policy: on Ant, standing still) beside it. Unfinished runs are named, not evaluated.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from scripts import evaluate, summarize  # noqa: E402


def final_runs(setting_dir: str) -> list:
    """(method, seed, run_dir) of every run directory under SETTING_DIR/<method>/, by method then seed."""
    runs = []
    for method in sorted(os.listdir(setting_dir)):
        method_dir = os.path.join(setting_dir, method)
        for name in os.listdir(method_dir) if os.path.isdir(method_dir) else []:
            run_dir = os.path.join(method_dir, name)
            if os.path.exists(os.path.join(run_dir, "config.json")):
                with open(os.path.join(run_dir, "config.json")) as f:
                    runs.append((method, json.load(f)["args"]["seed"], run_dir))
    return sorted(runs, key=lambda run: (run[0] != "PPO", run))  # PPO first, as in analyze.py


def report(setting_dir: str) -> int:
    runs = final_runs(setting_dir)
    if not runs:
        raise SystemExit(f"error: no run directories under {setting_dir}/<method>/")
    print("| method | seed | return, mean ± std (min, max) | mean episode length | the run's last evaluation "
          "| step-0 evaluation |")
    print("|---|---:|---|---:|---:|---:|")
    unfinished = []
    for method, seed, run_dir in runs:
        evaluations = summarize.read_evaluations(os.path.join(run_dir, "evaluations.csv"))
        with open(os.path.join(run_dir, "config.json")) as f:
            config = json.load(f)
        last, last_task = evaluations[-1], config["num_tasks"] - 1
        if last.global_step != config["args"]["steps_per_task"] * config["num_tasks"]:
            unfinished.append(f"{method} seed {seed} (last evaluation at step {last.global_step:,})")
            continue
        result = evaluate.evaluate_run(run_dir, last_task, config["args"]["eval_episodes"])
        # the final checkpoint is written at the last step: the same policy as the last evaluation, or it DIFFERS
        same = "equal" if (result["global_step"], result["return_mean"]) == (last.global_step, last.return_mean) \
            else "DIFFERS"
        print(f"| {method} | {seed} | {result['return_mean']:,.0f} ± {result['return_std']:,.0f} "
              f"({result['return_min']:,.0f}, {result['return_max']:,.0f}) | {result['length_mean']:,.0f} "
              f"| {last.return_mean:,.0f} ({same}) | {round(evaluations[0].return_mean):,} |")  # round: no "-0"
    if unfinished:
        print("\nUnfinished, not evaluated: " + "; ".join(unfinished))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting_dir", help="e.g. /work/paper_length/runs/paralysis/Ant/back-one")
    return report(parser.parse_args(argv).setting_dir)


if __name__ == "__main__":
    sys.exit(main())
