"""Stand-in algorithm script for the sweep/SLURM tests (not collected by pytest: no test_ prefix).

Obeys the run-dir part of docs CONTRACT: config.json, evaluations.csv (rows at step 0, every
eval_frequency steps and at every task end, task column = task evaluated), plasticity.csv,
summary.json only on success; resumes when started again; SIGTERM -> exit 75.
Returns are a known function of (seed, global_step): return_mean = 10 * seed + global_step / 100.
Behaviour switches (environment variables, so a sweep passes them to every run):
  FAKE_FAIL_SEEDS=2,3   exit 3 (the CONTRACT's non-finite stop) for these seeds, no summary.json
  FAKE_PREEMPT_ONCE=1   first attempt of each run exits 75 after writing a marker; next attempt finishes
  FAKE_SLEEP=SECONDS    sleep before finishing (SIGTERM during the sleep -> exit 75)
"""

import argparse
import json
import os
import signal
import sys
import time


def expected_rows(steps_per_task: int, num_tasks: int, eval_frequency: int) -> list[tuple[int, int]]:
    """(global_step, task evaluated) pairs as the CONTRACT describes them."""
    total = steps_per_task * num_tasks
    steps = {0, *range(eval_frequency, total + 1, eval_frequency), *(steps_per_task * (i + 1) for i in range(num_tasks))}
    return [(step, max(step - 1, 0) // steps_per_task) for step in sorted(steps)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--env-id", default="HalfCheetah-v5")
    parser.add_argument("--experiment", default="paralysis")
    parser.add_argument("--strategy", default="back-one")
    parser.add_argument("--steps-per-task", type=int, default=256)
    parser.add_argument("--num-tasks", type=int, default=2)
    parser.add_argument("--eval-frequency", type=int, default=128)
    parser.add_argument("--variant", default=None)
    parser.add_argument("--kappa", type=float, default=None)
    args, _unknown = parser.parse_known_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(75))
    os.makedirs(args.run_dir, exist_ok=True)
    config = {k: v for k, v in vars(args).items()} | {"script": os.path.basename(sys.argv[0])}
    with open(os.path.join(args.run_dir, "config.json"), "w") as f:
        json.dump(config, f)
    print(f"fake run seed={args.seed} run_dir={args.run_dir}")

    if str(args.seed) in os.environ.get("FAKE_FAIL_SEEDS", "").split(","):
        print("too many non-finite steps (fake)", file=sys.stderr)
        return 3
    marker = os.path.join(args.run_dir, "preempted_once")
    if os.environ.get("FAKE_PREEMPT_ONCE") and not os.path.exists(marker):
        open(marker, "w").close()
        print("preempted (fake)", file=sys.stderr)
        return 75
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))

    with open(os.path.join(args.run_dir, "evaluations.csv"), "w") as f:
        f.write("global_step,task,episodes,return_mean,return_std,return_min,return_max\n")
        for step, task in expected_rows(args.steps_per_task, args.num_tasks, args.eval_frequency):
            value = 10 * args.seed + step / 100
            f.write(f"{step},{task},1,{value},0.0,{value},{value}\n")
    with open(os.path.join(args.run_dir, "plasticity.csv"), "w") as f:
        f.write("global_step,task,network,effective_rank,stable_rank,dormant_percent\n")
        for i in range(args.num_tasks + 1):
            step, task = (i * args.steps_per_task, max(i - 1, 0))
            for network in ("critic", "actor"):
                f.write(f"{step},{task},{network},{100 - i - args.seed},{50 - i},{i + args.seed / 10}\n")
    total = args.steps_per_task * args.num_tasks
    with open(os.path.join(args.run_dir, "summary.json"), "w") as f:
        json.dump({"status": "finished", "global_step": total, "train_sps": 1.0, "wall_time_s": 0.0, "eval_time_s": 0.0}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
