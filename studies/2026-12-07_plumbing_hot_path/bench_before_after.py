"""One seed's training steps/s before and after a change of the shared code, interleaved in one process.

    git worktree add --detach /tmp/before 8c9228c
    python studies/2026-12-07_plumbing_hot_path/bench_before_after.py /tmp/before . --repeats 3

Each repeat runs every script of --scripts on every env of --env-ids at both commits, alternating which commit goes
first, through scripts/benchmark_sps.py's run_training (the script run in this process; train_sps of summary.json:
wall time less evaluation and plasticity time). Both commits must share nonstationary_envs.py, which this process
imports once. Prints one row per run and, per script and env, the median of each commit and their ratio.
"""

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from benchmark_sps import run_training  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="the earlier commit's checkout")
    parser.add_argument("after", help="the later commit's checkout")
    parser.add_argument("--scripts", nargs="+", default=["ppo_continuous.py", "eppo_continuous.py"])
    parser.add_argument("--env-ids", nargs="+", default=["HalfCheetah-v5", "Ant-v5"])
    parser.add_argument("--steps", type=int, default=20480)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    checkouts = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    measured = {}
    for repeat in range(args.repeats):
        order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
        for script in args.scripts:
            for env_id in args.env_ids:
                for label in order:
                    sps = run_training(os.path.join(checkouts[label], script), env_id, args.steps, 1, [])["train_sps"]
                    measured.setdefault((script, env_id, label), []).append(sps)
                    print(f"ROW repeat={repeat} {script} {env_id} {label} {sps:.0f}", flush=True)
    print("\n| script | env | before (median steps/s) | after (median steps/s) | after / before | runs each |")
    print("|---|---|---|---|---|---|")
    for script in args.scripts:
        for env_id in args.env_ids:
            before, after = (statistics.median(measured[(script, env_id, label)]) for label in ("before", "after"))
            print(f"| {script} | {env_id} | {before:,.0f} | {after:,.0f} | {after / before:.3f} | {args.repeats} |")


if __name__ == "__main__":
    main()
