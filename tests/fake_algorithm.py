"""Stand-in algorithm script and run-directory writer for the tooling tests (no test_ prefix: not collected).

`write_run` lays out a run directory as docs CONTRACT and ppo_continuous.py do: config.json
({"args": ..., "script", "method", "num_tasks"}), evaluations.csv (rows at step 0, every
eval_frequency steps and at every task end; task column = task evaluated), plasticity.csv (rows at
step 0 and every task end, critic and actor), and summary.json only for a finished run; `write_launched_run` adds
what a study launcher leaves beside them (a one-seed process's run_dir template, a checkpoint).

Run as a script (copied to <tmp>/ppo_continuous.py etc.), it parses the shared CLI flags, writes a
finished run whose returns are return_mean = 10 * seed + global_step / 100 + 100 * kappa, and exits 0.
Behaviour switches (environment variables, so a sweep passes them to every run):
  FAKE_FAIL_SEEDS=2,3   exit 3 (the CONTRACT's non-finite stop) for these seeds, no summary.json
  FAKE_PREEMPT_ONCE=1   first attempt of each run exits 75 after writing a marker; next attempt finishes
  FAKE_SLEEP=SECONDS    sleep before finishing; SIGTERM -> exit 75 (prints "ready" once the handler is set)
"""

import argparse
import json
import os
import signal
import sys
import time

FAKE_SCRIPT = os.path.abspath(__file__)
# The CONTRACT's tiny configuration of a real algorithm script (a run takes seconds).
TINY_FLAGS = ["--steps-per-task", "256", "--num-tasks", "2", "--num-steps", "128", "--minibatch-size", "64",
              "--update-epochs", "1", "--eval-frequency", "128", "--eval-episodes", "1", "--max-episode-steps", "50",
              "--no-cuda"]  # fmt: skip


def evaluation_rows(steps_per_task: int, num_tasks: int, eval_frequency: int) -> list[tuple[int, int]]:
    """(global_step, task evaluated) pairs as the CONTRACT describes them."""
    total = steps_per_task * num_tasks
    steps = {0, *range(eval_frequency, total + 1, eval_frequency),
             *(steps_per_task * (i + 1) for i in range(num_tasks))}
    return [(step, max(step - 1, 0) // steps_per_task) for step in sorted(steps)]


def write_run(
    run_dir, *, method="PPO", script=None, env_id="HalfCheetah-v5", experiment="paralysis", strategy="back-one",
    seed=1, steps_per_task=100, num_tasks=2, eval_frequency=50, returns=lambda step, task: 0.0, kappa=None,
    finished=True, drop_steps=(), plasticity=lambda step, network: (10.0, 5.0, 1.0), schedule=None,
):  # fmt: skip
    """Write a run directory; `returns(step, task)` gives return_mean, `plasticity(step, network)` the
    (effective_rank, stable_rank, dormant_percent) triple; rows at `drop_steps` are left out; `schedule` (the task
    parameters, nonstationary_envs.task_schedule's) goes into config.json when given."""
    os.makedirs(run_dir, exist_ok=True)
    variant = method.split("_", 1)[1] if method.startswith("EPPO_") else None
    script = script or ("eppo_continuous.py" if variant else f"{method.lower()}_continuous.py")
    args = {"env_id": env_id, "experiment": experiment, "strategy": strategy, "seed": seed,
            "steps_per_task": steps_per_task, "num_tasks": num_tasks, "eval_frequency": eval_frequency,
            "run_dir": run_dir}  # fmt: skip
    if variant:
        args |= {"variant": variant, "kappa": kappa}
    config = {"args": args, "script": script, "method": method, "num_tasks": num_tasks,
              "total_steps": steps_per_task * num_tasks}
    # the task parameters as the scripts record them (str of each), e.g. for the figures' labels
    if schedule is not None:
        config["schedule"] = [str(task) for task in schedule[:num_tasks]]
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(run_dir, "evaluations.csv"), "w") as f:
        f.write("global_step,task,episodes,return_mean,return_std,return_min,return_max\n")
        for step, task in evaluation_rows(steps_per_task, num_tasks, eval_frequency):
            if step not in drop_steps:
                value = returns(step, task)
                f.write(f"{step},{task},1,{value},0.0,{value},{value}\n")
    with open(os.path.join(run_dir, "plasticity.csv"), "w") as f:
        f.write("global_step,task,network,effective_rank,stable_rank,dormant_percent\n")
        for i in range(num_tasks + 1):
            step = i * steps_per_task
            for network in ("critic", "actor"):
                f.write(f"{step},{max(i - 1, 0)},{network},{','.join(map(str, plasticity(step, network)))}\n")
    if finished:
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump({"status": "finished", "global_step": steps_per_task * num_tasks, "train_sps": 1.0,
                       "wall_time_s": 0.0, "eval_time_s": 0.0}, f)  # fmt: skip


def write_launched_run(run_dir, *, method, finished, drop_steps=()) -> None:
    """A run as a study launcher leaves it (studies/2026-11-26_paper_length_v0.1_defaults/launch.sh's modes read
    it): write_run's files, with config.json's run_dir as the seed{seed} template of a one-seed process, and a
    checkpoint at step 100 (what resume_store.py stashes; its file is not a real one)."""
    import torch

    write_run(run_dir, method=method, finished=finished, drop_steps=drop_steps)
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    config["args"] |= {"run_dir": os.path.join(os.path.dirname(run_dir), "seed{seed}"), "num_seeds": 1}
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(config, f)
    torch.save({"global_step": 100}, os.path.join(run_dir, "checkpoint.pt"))


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
    print(f"ready: seed={args.seed} run_dir={args.run_dir}", flush=True)
    script = os.path.basename(sys.argv[0])
    method = f"EPPO_{args.variant}" if args.variant else script.removesuffix("_continuous.py").upper()

    if str(args.seed) in os.environ.get("FAKE_FAIL_SEEDS", "").split(","):
        print("too many non-finite steps (fake)", file=sys.stderr)
        return 3
    os.makedirs(args.run_dir, exist_ok=True)
    marker = os.path.join(args.run_dir, "preempted_once")
    if os.environ.get("FAKE_PREEMPT_ONCE") and not os.path.exists(marker):
        open(marker, "w").close()
        print("preempted (fake)", file=sys.stderr)
        return 75
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
    write_run(
        args.run_dir, method=method, script=script, env_id=args.env_id, experiment=args.experiment,
        strategy=args.strategy, seed=args.seed, steps_per_task=args.steps_per_task, num_tasks=args.num_tasks,
        eval_frequency=args.eval_frequency,
        returns=lambda step, task: 10 * args.seed + step / 100 + 100 * (args.kappa or 0),
        kappa=args.kappa,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
