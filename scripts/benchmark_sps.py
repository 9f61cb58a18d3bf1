"""Training throughput of an algorithm script against the raw simulator, measured in one process.

    python scripts/benchmark_sps.py ppo_continuous.py --env-id HalfCheetah-v5 --steps 20480
    python scripts/benchmark_sps.py ppo_continuous.py --num-seeds 16 -- --cuda

Prints the raw MuJoCo env steps/s (random actions on ``env.unwrapped``), the script's training steps/s
(``summary.json``'s train_sps: wall time minus evaluation and plasticity-metric time), in aggregate over the
``--num-seeds`` seeds trained in the process and per seed, their ratio to the raw simulator, and the evaluation
overhead projected onto the paper's protocol (10 episodes every 20,000 steps and at every task end).
Extra arguments after ``--`` go to the script (e.g. ``-- --variant ind --kappa 0.1``, ``-- --cuda``).
"""

import argparse
import json
import os
import runpy
import sys
import tempfile
import time

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # the scripts import the shared modules next to them
import nonstationary_envs  # noqa: E402  (builds the envs without MuJoCo's deprecation warning and log file)
PAPER_STEPS_PER_TASK = 500_000
PAPER_EVAL_FREQUENCY = 20_000


def raw_env_sps(env_id: str, steps: int, seed: int = 0) -> float:
    """Steps/s of the bare simulator (``env.unwrapped``, random actions, resets on termination or 1000 steps)."""
    env = nonstationary_envs.make_nonstationary_env(env_id, "none", "none").unwrapped
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(env.action_space.low, env.action_space.high, (steps, env.action_space.shape[0]))
    length = 0
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, _, _ = env.step(action)
        length += 1
        if terminated or length == 1000:
            env.reset()
            length = 0
    return steps / (time.perf_counter() - start)


def run_training(script: str, env_id: str, steps: int, num_seeds: int, script_args: list) -> dict:
    """Run ``script`` in this process for ``steps`` steps per seed (one task, evaluation at start and end); the
    first seed's summary (train_sps per seed, group_train_sps for all seeds)."""
    run_dir = tempfile.mkdtemp(prefix="benchmark_sps_")
    argv = [script, "--env-id", env_id, "--experiment", "none", "--steps-per-task", str(steps),
            "--eval-frequency", str(steps), "--num-seeds", str(num_seeds),
            "--run-dir", os.path.join(run_dir, "seed{seed}"), *script_args]
    saved_argv = sys.argv
    sys.argv = argv
    try:
        runpy.run_path(os.path.join(REPO_ROOT, script), run_name="__main__")
    except SystemExit as exit_status:
        if exit_status.code not in (0, None):
            raise RuntimeError(f"{script} exited with {exit_status.code}") from None
    finally:
        sys.argv = saved_argv
    first_seed_dir = os.path.join(run_dir, sorted(os.listdir(run_dir))[0])
    with open(os.path.join(first_seed_dir, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(first_seed_dir, "evaluations.csv")) as f:
        summary["evaluations"] = sum(1 for _ in f) - 1
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("script", help="algorithm script at the repository root, e.g. ppo_continuous.py")
    parser.add_argument("--env-id", default="HalfCheetah-v5", choices=["HalfCheetah-v5", "Ant-v5"])
    parser.add_argument("--steps", type=int, default=20480, help="training steps (10 PPO updates by default)")
    parser.add_argument("--raw-steps", type=int, default=20000, help="steps for the raw-simulator measurement")
    parser.add_argument("--num-seeds", type=int, default=1, help="seeds trained in the one process (--num-seeds)")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args, script_args = parser.parse_args(argv[:split]), argv[split + 1 :]
    if not os.path.exists(os.path.join(REPO_ROOT, args.script)):
        parser.error(f"no script {args.script} at the repository root")

    raw = raw_env_sps(args.env_id, args.raw_steps)
    if args.num_seeds < 1:
        parser.error(f"--num-seeds must be >= 1, got {args.num_seeds}")
    summary = run_training(args.script, args.env_id, args.steps, args.num_seeds, script_args)
    seconds_per_eval = summary["eval_time_s"] / summary["evaluations"]
    paper_evals_per_task = (PAPER_STEPS_PER_TASK // PAPER_EVAL_FREQUENCY
                            + (PAPER_STEPS_PER_TASK % PAPER_EVAL_FREQUENCY > 0))
    paper_train_seconds_per_task = PAPER_STEPS_PER_TASK / summary["train_sps"]
    eval_overhead = paper_evals_per_task * seconds_per_eval / paper_train_seconds_per_task
    print(f"script           {args.script} {' '.join(script_args)}")
    print(f"env              {args.env_id}")
    print(f"raw env SPS      {raw:,.0f}")
    print(f"seeds            {summary['num_seeds']} in one process on {summary['device']}")
    print(f"train SPS        {summary['group_train_sps']:,.0f} in aggregate, {summary['train_sps']:,.0f} per seed  "
          f"({args.steps} steps per seed, evaluation excluded)")
    print(f"train / raw      {summary['group_train_sps'] / raw:.3f} (aggregate)")
    print(f"one evaluation   {seconds_per_eval:.2f} s ({summary['evaluations']} measured)")
    print(f"eval overhead    {100 * eval_overhead:.1f}% of training time under the paper's protocol "
          f"({paper_evals_per_task} evaluations per {PAPER_STEPS_PER_TASK:,}-step task)")
    print(f"plasticity time  {summary['plasticity_time_s']:.2f} s")


if __name__ == "__main__":
    main()
