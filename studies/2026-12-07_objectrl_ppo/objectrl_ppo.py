"""ObjectRL's PPO (objectrl 0.2.1, the paper's authors' library; its logic unchanged) on our non-stationary tasks.

An adapter, not a copy: ObjectRL's own ``ControlExperiment.train`` loop, agent, networks, buffer, GAE and updates run
as published. The adapter only
  * builds ObjectRL's training and evaluation envs with ``nonstationary_envs.make_nonstationary_env`` (ObjectRL's
    ``make_env`` knows only its own table of names), wrapped and seeded as ObjectRL's ``make_env`` wraps and seeds
    its envs; the task is switched by global step, mid-episode, as in our scripts;
  * replaces ObjectRL's evaluation by ours (the paper's protocol, as ``evaluate_policy`` of our scripts): 10 episodes
    at step 0, every --eval-frequency steps and at each task's end, deterministic actions, episode i reset with seed
    + 100 + i, on the task of the step just taken;
  * checkpoints what ObjectRL's agent holds (weights, both Adams, the buffer, the counters, the RNGs, the episode in
    progress) every --checkpoint-every steps and on SIGTERM, at a step where ObjectRL's learning schedule
    (every 2048 steps) lines up, so that a resumed run continues bit for bit (test_objectrl_ppo.py checks it);
  * writes our outputs (config.json, evaluations.csv, summary.json), which scripts/summarize.py and
    scripts/plot_curves.py read.

Run it with the study's environment (install.sh):

  .venv/bin/python objectrl_ppo.py --env-id Ant-v5 --seed 1 --num-tasks 2 --run-dir runs/Ant/seed1

The knobs, and which of them the paper states and which ObjectRL decides: KNOBS below and README.md.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
import nonstationary_envs  # noqa: E402  (the repository's module, imported from the checkout)
from objectrl_envs import (GlobalStepTasks, adapter_make_env, evaluate_episodes, evaluated_task,  # noqa: E402
                           evaluation_points, find_wrapper)

import objectrl.experiments.base_experiment as objectrl_base_experiment  # noqa: E402
from objectrl.config.config import MainConfig  # noqa: E402
from objectrl.experiments.control_experiment import ControlExperiment  # noqa: E402
from objectrl.main import set_reproducibility  # noqa: E402

PATCH = HERE / "objectrl-0.2.1-python3.11.patch"
# install.sh checks the downloaded wheel against this digest before installing it
WHEEL_SHA256 = "ed4378aa982f6ae6850a4599836ac625c5d15851e93e3d388dc994d35f48ef80"
# ObjectRL's learning schedule: agent.learn at every step index divisible by learn_frequency (the horizon); a
# checkpoint is taken only at such a step, so that a resumed run learns at the same global steps.
EXIT_INTERRUPTED = 75  # as our scripts: stopped by SIGTERM after writing a checkpoint
# our scripts' columns (our protocol: the mode clipped to the action space), then ObjectRL's own evaluation's mean
# return (the mode unclipped, its control cost charged), from the same episodes
EVALUATIONS_HEADER = ["global_step", "task", "episodes", "return_mean", "return_std", "return_min", "return_max",
                      "return_mean_unclipped"]


def objectrl_config(args: argparse.Namespace, total_steps: int) -> dict:
    """ObjectRL's MainConfig.from_config input: the paper's Appendix B where ObjectRL has the knob, ObjectRL's own
    defaults everywhere else (every value this dict does not set; README.md lists them all)."""
    return {
        "model": {
            "name": "ppo",
            # Appendix B: two hidden layers of 256 with LayerNorm and ReLU (ObjectRL's depth counts the 3 Linear
            # layers; its LayerNorm has no affine parameters); ObjectRL's PPO defaults are 64 wide without norm
            "actor": {"width": args.width, "depth": 3, "norm": True, "activation": "relu"},
            "critic": {"width": args.width, "depth": 3, "norm": True, "activation": "relu"},
            "clip_rate": 0.2,          # Appendix B (ObjectRL's default too)
            "GAE_lambda": 0.95,        # Appendix B (ObjectRL's default too)
            "max_grad_norm": 0.5,      # Appendix B (ObjectRL's default too; applied per network)
        },
        "training": {
            "learning_rate": 3e-4,     # Appendix B (ObjectRL's default too; one rate for both Adams)
            "gamma": 0.99,             # Appendix B (ObjectRL's default too)
            "batch_size": args.minibatch_size,  # Appendix B: minibatch 256 (ObjectRL's default too)
            "learn_frequency": args.horizon,    # Appendix B: horizon 2048 (ObjectRL's default: 1)
            "n_epochs": args.update_epochs,     # Appendix B: 10 epochs (ObjectRL's default: 0)
            "warmup_steps": 0,         # PPO asserts 0 (ObjectRL's default: 10,000)
            "max_steps": total_steps,
            "eval_episodes": args.eval_episodes,
            # ObjectRL calls eval(step) at every step index divisible by eval_frequency; 1 makes it the adapter's
            # per-step hook, which evaluates at our schedule (EVALUATION POINTS) and checkpoints
            "eval_frequency": 1,
        },
        "system": {"seed": args.seed, "device": "cpu", "storing_device": "cpu"},  # the paper trained on CPUs
        "logging": {"result_path": str(Path(args.run_dir) / "objectrl_logs")},
    }


class OurProtocolExperiment(ControlExperiment):
    """ObjectRL's ControlExperiment with our envs, our evaluation protocol and checkpoints; train() is ObjectRL's."""

    def __init__(self, config: MainConfig, args: argparse.Namespace):
        published_make_env = objectrl_base_experiment.make_env
        objectrl_base_experiment.make_env = adapter_make_env(args)
        try:
            super().__init__(config)
        finally:
            objectrl_base_experiment.make_env = published_make_env
        self.args = args
        self.tasks: GlobalStepTasks = find_wrapper(self.env, GlobalStepTasks)
        self.pending = evaluation_points(args.steps_per_task, args.num_tasks, args.eval_frequency)
        self.stop_requested = False
        self.start_step = 0
        self.evaluations_csv = Path(args.run_dir) / "evaluations.csv"
        self.checkpoint_path = Path(args.run_dir) / "checkpoint.pt"
        self.train_start = time.perf_counter()
        self.eval_seconds = 0.0
        self.previous_train_s = 0.0  # the training time of earlier sessions (a resumed run)

    # ObjectRL calls eval(step) at the start of every step (eval_frequency 1) and once after its loop
    @torch.inference_mode()
    def eval(self, n_step: int) -> None:
        global_step = self.tasks.steps_taken
        if self.pending and global_step >= self.pending[0]:
            self.evaluate(self.pending.pop(0))
        self.stop_requested |= bool(self.args.stop_at) and global_step >= self.args.stop_at
        at_learning_step = global_step % self.config.training.learn_frequency == 0
        if global_step > self.start_step and at_learning_step and global_step < self.args.total_steps:
            if self.stop_requested or global_step % self.args.checkpoint_every == 0:
                self.write_checkpoint(global_step)
            if self.stop_requested:
                raise RunInterrupted(global_step)

    def evaluate(self, global_step: int) -> None:
        start = time.perf_counter()
        torch_rng_state = torch.get_rng_state()  # as ObjectRL's eval: training's RNG stream is left as it was
        self.agent.eval()
        task = evaluated_task(global_step, self.args.steps_per_task)
        returns, unclipped = evaluate_episodes(self.agent, self.eval_env, task, self.args.seed,
                                               self.args.eval_episodes)
        self.agent.train()
        torch.set_rng_state(torch_rng_state)
        write_csv_row(self.evaluations_csv, [global_step, task, len(returns), returns.mean(), returns.std(),
                                             returns.min(), returns.max(), unclipped.mean()])
        self.eval_seconds += time.perf_counter() - start
        print(f"eval step={global_step} task={task} return={returns.mean():.1f} +- {returns.std():.1f} "
              f"| {sps(self):.0f} SPS", flush=True)

    # ---- checkpoints: everything ObjectRL's agent and loop carry from one step to the next ----

    def checkpoint_state(self, global_step: int) -> dict:
        memory = self.agent.experience_memory
        stored = memory.sample_all() if len(memory) else None
        inner = find_wrapper(self.env, nonstationary_envs.NonstationaryEnv)
        return {
            "global_step": global_step,
            "agent": self.agent.state_dict(),
            "actor_optim": self.agent.actor.optim.state_dict(),
            "critic_optim": self.agent.critic.optim.state_dict(),
            "counters": {"n_iter": self.agent.n_iter, "actor_iter": self.agent.actor.iter,
                         "critic_iter": self.agent.critic.iter},
            "memory": None if stored is None else {key: value.clone() for key, value in stored.items()},
            "torch_rng": torch.get_rng_state(),
            "numpy_rng": numpy_rng_state(),
            "env": nonstationary_envs.get_env_state(inner),
            "steps_taken": self.tasks.steps_taken,
            "observation": torch.from_numpy(np.asarray(self.tasks.last_observation)),
            "pending": list(self.pending),
            "time": {"train_s": time.perf_counter() - self.train_start + self.previous_train_s,
                     "eval_s": self.eval_seconds},
        }

    def write_checkpoint(self, global_step: int) -> None:
        temporary = self.checkpoint_path.with_suffix(".tmp")
        torch.save(self.checkpoint_state(global_step), temporary)
        os.replace(temporary, self.checkpoint_path)

    def restore(self, state: dict) -> None:
        from tensordict import TensorDict

        self.agent.load_state_dict(state["agent"])
        self.agent.actor.optim.load_state_dict(state["actor_optim"])
        self.agent.critic.optim.load_state_dict(state["critic_optim"])
        self.agent.n_iter = state["counters"]["n_iter"]
        self.agent.actor.iter = state["counters"]["actor_iter"]
        self.agent.critic.iter = state["counters"]["critic_iter"]
        self.agent.experience_memory.reset()
        if state["memory"] is not None:
            memory = state["memory"]
            size = next(iter(memory.values())).shape[0]
            self.agent.experience_memory.add_batch(TensorDict(memory, batch_size=[size]))
        nonstationary_envs.set_env_state(find_wrapper(self.env, nonstationary_envs.NonstationaryEnv), state["env"])
        self.tasks.steps_taken = state["steps_taken"]
        self.tasks.last_observation = self.tasks.resume_observation = state["observation"].numpy()
        torch.set_rng_state(state["torch_rng"])
        set_numpy_rng_state(state["numpy_rng"])
        self.pending = list(state["pending"])
        self.start_step = state["global_step"]
        self.previous_train_s = state["time"]["train_s"]
        self.eval_seconds = state["time"]["eval_s"]
        # ObjectRL's loop counts its steps from 0: the rest of the run is max_steps more steps. Its learning schedule
        # (step index divisible by learn_frequency) lines up because global_step is a multiple of it.
        self.max_steps = self.args.total_steps - state["global_step"]


def numpy_rng_state() -> dict:
    """numpy's global RNG state as tensors and plain values (a checkpoint torch.load reads with weights_only)."""
    name, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    return {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position),
            "has_gauss": int(has_gauss), "cached_gaussian": float(cached_gaussian)}


def set_numpy_rng_state(state: dict) -> None:
    np.random.set_state((state["name"], state["keys"].numpy().astype(np.uint32), state["position"],
                         state["has_gauss"], state["cached_gaussian"]))


class RunInterrupted(Exception):
    """Raised from the per-step hook after a checkpoint, when SIGTERM asked the run to stop."""


def sps(experiment: OurProtocolExperiment) -> float:
    train_s = time.perf_counter() - experiment.train_start + experiment.previous_train_s - experiment.eval_seconds
    return experiment.tasks.steps_taken / max(train_s, 1e-9)


def write_csv_row(path: Path, row: list) -> None:
    new = not path.exists()
    with open(path, "a") as f:
        if new:
            f.write(",".join(EVALUATIONS_HEADER) + "\n")
        f.write(",".join(str(v) for v in row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def keep_rows_until(path: Path, last_step: int) -> None:
    """A resumed run drops the evaluation rows written after its checkpoint (they are written again)."""
    if not path.exists():
        return
    lines = path.read_text().splitlines(keepends=True)
    kept = lines[:1] + [line for line in lines[1:] if int(line.split(",", 1)[0]) <= last_step]
    path.write_text("".join(kept))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_config(args: argparse.Namespace, config: dict) -> dict:
    """config.json: our keys (args, method, schedule, versions) and every knob ObjectRL ran with."""
    import mujoco

    schedule = nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", str(HERE.relative_to(REPO)), "nonstationary_envs.py"],
                           cwd=REPO, capture_output=True, text=True).stdout.strip()
    resolved = MainConfig.from_config(copy.deepcopy(config))
    knobs = {"model": _plain(resolved.model), "training": _plain(resolved.training), "system": _plain(resolved.system)}
    return {
        # run_dir and num_seeds as our scripts record them (the studies' resume_store.py groups runs by them)
        "args": {**{key: value for key, value in vars(args).items() if key != "stop_at"}, "num_seeds": 1},
        "script": "objectrl_ppo.py", "method": "ObjectRL_PPO", "run_name": f"ObjectRL_PPO__seed{args.seed}",
        "num_tasks": args.num_tasks, "total_steps": args.total_steps,
        "schedule": [str(p) for p in schedule[: args.num_tasks]], "device": "cpu",
        # the distribution's version (the module's own __version__ says 0.0.1 in the 0.2.1 release)
        "objectrl": {"version": importlib.metadata.version("objectrl"), "wheel_sha256": WHEEL_SHA256,
                     "patch": PATCH.name, "patch_sha256": sha256(PATCH), "knobs": knobs},
        "git_commit": commit or None, "adapter_modified": bool(dirty),
        "python": sys.version.split()[0], "torch": torch.__version__, "gymnasium": gym.__version__,
        "mujoco": mujoco.__version__, "numpy": np.__version__,
    }


def _plain(value):
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return getattr(value, "__name__", str(value))


def parse_args(argv: list) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="Ant-v5", choices=nonstationary_envs.ENV_IDS)
    parser.add_argument("--experiment", default="paralysis", choices=nonstationary_envs.EXPERIMENTS)
    parser.add_argument("--strategy", default="back-one")
    parser.add_argument("--friction-mode", default="floor", choices=nonstationary_envs.FRICTION_MODES)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps-per-task", type=int, default=500_000)
    parser.add_argument("--num-tasks", type=int, default=0, help="tasks to run (0: the whole schedule)")
    parser.add_argument("--eval-frequency", type=int, default=20_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--width", type=int, default=256, help="hidden width (Appendix B: 256)")
    parser.add_argument("--horizon", type=int, default=2048, help="steps per update (Appendix B: 2048)")
    parser.add_argument("--minibatch-size", type=int, default=256, help="Appendix B: 256")
    parser.add_argument("--update-epochs", type=int, default=10, help="Appendix B: 10")
    parser.add_argument("--checkpoint-every", type=int, default=20 * 2048,
                        help="steps between checkpoints (a multiple of --horizon)")
    parser.add_argument("--stop-at", type=int, default=0,
                        help="stop as on SIGTERM (checkpoint, exit 75) at the first step >= this that allows one")
    parser.add_argument("--run-dir", required=True)
    args = parser.parse_args(argv)
    try:
        nonstationary_envs.validate_setting(args.env_id, args.experiment, args.strategy, args.friction_mode)
    except ValueError as error:
        parser.error(str(error))
    schedule_length = len(nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy))
    if not 0 <= args.num_tasks <= schedule_length:
        parser.error(f"--num-tasks: {args.num_tasks} is not in 0..{schedule_length} for this setting")
    args.num_tasks = args.num_tasks or schedule_length
    if args.checkpoint_every % args.horizon:
        parser.error(f"--checkpoint-every: {args.checkpoint_every} is not a multiple of --horizon {args.horizon}")
    args.total_steps = args.steps_per_task * args.num_tasks
    return args


def main(argv: list) -> int:
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # one core per run, as our runs (two runs share the 2-core machine)
    config = objectrl_config(args, args.total_steps)
    record = run_config(args, config)
    config_path = run_dir / "config.json"
    if config_path.exists():
        previous = json.loads(config_path.read_text())
        if previous["args"] != record["args"] or previous["objectrl"] != record["objectrl"]:
            print(f"error: --run-dir {run_dir} holds a run of another configuration", file=sys.stderr)
            return 2
    if (run_dir / "summary.json").exists():
        print(f"{run_dir} has finished")
        return 0
    config_path.write_text(json.dumps(record, indent=2))
    set_reproducibility(args.seed)  # ObjectRL's main(): torch's seed, deterministic algorithms
    experiment = OurProtocolExperiment(MainConfig.from_config(config), args)
    checkpoint = experiment.checkpoint_path
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=True)
        experiment.restore(state)
        keep_rows_until(experiment.evaluations_csv, state["global_step"])  # evaluated before the checkpoint
        print(f"resumed {run_dir} at step {state['global_step']}", flush=True)
    else:
        experiment.evaluations_csv.unlink(missing_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: setattr(experiment, "stop_requested", True))
    try:
        experiment.train()
    except RunInterrupted as stop:
        print(f"stopped at step {stop.args[0]} (checkpoint written)", flush=True)
        return EXIT_INTERRUPTED
    train_s = time.perf_counter() - experiment.train_start + experiment.previous_train_s
    summary = {"status": "finished", "global_step": experiment.tasks.steps_taken,
               "train_sps": experiment.tasks.steps_taken / max(train_s - experiment.eval_seconds, 1e-9),
               "wall_time_s": train_s, "train_time_s": train_s - experiment.eval_seconds,
               "eval_time_s": experiment.eval_seconds, "num_seeds": 1, "device": "cpu"}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    checkpoint.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
