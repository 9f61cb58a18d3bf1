"""External anchor: Stable-Baselines3 PPO on the unchanged gymnasium ``Ant-v5``, evaluated with our protocol.

Two configurations:

* ``sb3_default``: ``PPO("MlpPolicy", env, seed=seed)`` with every SB3 default (n_steps 2048, batch 64,
  10 epochs, lr 3e-4, tanh 64x64, log_std_init 0, no observation/reward normalization, no VecNormalize).
* ``sb3_paper``: the same, but ``batch_size=256`` and separate 256x256 ReLU policy and value networks (the
  EPPO paper's stated width, activation and minibatch; SB3 has no LayerNorm).

Training env: ``Monitor(gym.make("Ant-v5"))`` (105-dim observation with contact forces, 1000-step TimeLimit),
seeded through ``PPO(..., seed=seed)``.

Evaluation (our protocol, as in ppo_continuous.py & co.): at step 0 and whenever ``num_timesteps % eval_every
== 0`` (checked in a callback after every environment step, so mid-rollout, with the policy of the last
update), 10 episodes; episode i runs on a fresh ``gym.make("Ant-v5")`` reset with ``seed + 100 + i``, action
``model.predict(obs, deterministic=True)`` (the Gaussian mean clipped to [-1, 1]), undiscounted return.

Outputs in ``--out``:

* ``evaluations.csv``: ``global_step,task,episodes,return_mean,return_std,return_min,return_max`` (task 0,
  return_std = np.std, the population std), flushed after every row;
* ``training.csv``: ``global_step,policy_std_mean,train_episode_length_mean,train_episode_return_mean`` at each
  evaluation step (policy std = exp(log_std).mean(); episode stats over the training episodes that ended since
  the previous evaluation, empty when none did);
* ``config.json``: configuration, seed, library versions; at the end also ``finished: true``, wall time and
  steps/s.

SB3's PPO learns in whole rollouts of 2048 steps, so a 1,000,000-step run trains to 1,001,472 steps
(489 rollouts); the evaluation at 1,000,000 uses the policy after 488 updates.

Example::

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 nice -n 19 \\
        python studies/2026-11-27_why_ppo_does_not_walk_on_ant/sb3/sb3_anchor.py \\
        --config sb3_default --seed 1001 --total-steps 1000000 --out /work/ant_walk_sb3/sb3_default/seed1001
"""

import argparse
import csv
import json
import os
import platform
import time

import gymnasium as gym
import mujoco
import numpy as np
import stable_baselines3
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.monitor import Monitor

ENV_ID = "Ant-v5"
CONFIGS = {
    "sb3_default": {},
    "sb3_paper": {
        "batch_size": 256,
        "policy_kwargs": {"net_arch": {"pi": [256, 256], "vf": [256, 256]}, "activation_fn": torch.nn.ReLU},
    },
}
EVAL_HEADER = ["global_step", "task", "episodes", "return_mean", "return_std", "return_min", "return_max"]
TRAIN_HEADER = ["global_step", "policy_std_mean", "train_episode_length_mean", "train_episode_return_mean"]


class CsvLog:
    """A CSV file with a header, flushed after every row."""

    def __init__(self, path: str, header: list):
        self.file = open(path, "w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(header)
        self.file.flush()

    def write(self, row: list) -> None:
        self.writer.writerow(row)
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def evaluate(model: PPO, seed: int, episodes: int) -> np.ndarray:
    """Undiscounted returns of ``episodes`` deterministic episodes; episode i on a fresh env reset with
    seed + 100 + i."""
    returns = np.zeros(episodes)
    for i in range(episodes):
        env = gym.make(ENV_ID)
        obs, _ = env.reset(seed=seed + 100 + i)
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)  # clipped to the action space, [-1, 1]
            obs, reward, terminated, truncated, _ = env.step(action)
            returns[i] += reward
            done = terminated or truncated
        env.close()
    return returns


class EvalCallback(BaseCallback):
    """Evaluates at step 0 and at every multiple of ``eval_every`` training steps; logs evaluations.csv and
    training.csv."""

    def __init__(self, monitor: Monitor, seed: int, out: str, eval_every: int, episodes: int):
        super().__init__()
        self.monitor, self.seed, self.eval_every, self.episodes = monitor, seed, eval_every, episodes
        self.eval_log = CsvLog(os.path.join(out, "evaluations.csv"), EVAL_HEADER)
        self.train_log = CsvLog(os.path.join(out, "training.csv"), TRAIN_HEADER)
        self.episodes_seen = 0  # training episodes already summarized in training.csv
        self.eval_seconds = 0.0
        self.start = time.perf_counter()

    def _evaluate(self) -> None:
        t0 = time.perf_counter()
        step = self.num_timesteps
        returns = evaluate(self.model, self.seed, self.episodes)
        self.eval_log.write([step, 0, self.episodes, returns.mean(), np.std(returns), returns.min(), returns.max()])
        policy_std = torch.exp(self.model.policy.log_std).mean().item()
        ep_returns = self.monitor.get_episode_rewards()[self.episodes_seen:]
        ep_lengths = self.monitor.get_episode_lengths()[self.episodes_seen:]
        self.episodes_seen += len(ep_returns)
        self.train_log.write([step, policy_std,
                              np.mean(ep_lengths) if ep_lengths else "",
                              np.mean(ep_returns) if ep_returns else ""])
        self.eval_seconds += time.perf_counter() - t0
        elapsed = time.perf_counter() - self.start
        print(f"[eval] step {step} return {returns.mean():.1f} +- {np.std(returns):.1f} "
              f"(min {returns.min():.1f}, max {returns.max():.1f}) policy_std {policy_std:.3f} "
              f"train_episodes {len(ep_returns)} "
              f"train_return {np.mean(ep_returns) if ep_returns else float('nan'):.1f} "
              f"elapsed {elapsed:.0f}s ({step / max(elapsed, 1e-9):.0f} steps/s)", flush=True)

    def _on_training_start(self) -> None:
        self._evaluate()  # step 0: the untrained policy

    def _on_step(self) -> bool:
        if self.num_timesteps % self.eval_every == 0:
            self._evaluate()
        return True

    def _on_training_end(self) -> None:
        self.eval_log.close()
        self.train_log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, choices=sorted(CONFIGS))
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--total-steps", type=int, default=1_000_000)
    parser.add_argument("--out", required=True)
    parser.add_argument("--eval-every", type=int, default=20_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--verbose", type=int, default=1, help="SB3 verbosity (1: its training table per rollout)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    config = {
        "config": args.config, "seed": args.seed, "env_id": ENV_ID, "total_steps": args.total_steps,
        "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
        "ppo_kwargs": {k: (repr(v) if k == "policy_kwargs" else v) for k, v in CONFIGS[args.config].items()},
        "versions": {"stable_baselines3": stable_baselines3.__version__, "gymnasium": gym.__version__,
                     "mujoco": mujoco.__version__, "torch": torch.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "torch_threads": torch.get_num_threads(), "finished": False,
    }
    config_path = os.path.join(args.out, "config.json")

    def dump() -> None:
        with open(config_path, "w") as f:
            json.dump(config, f, indent=2)

    dump()
    monitor = Monitor(gym.make(ENV_ID))
    model = PPO("MlpPolicy", monitor, seed=args.seed, verbose=args.verbose, device="cpu", **CONFIGS[args.config])
    callback = EvalCallback(monitor, args.seed, args.out, args.eval_every, args.eval_episodes)
    start = time.perf_counter()
    model.learn(total_timesteps=args.total_steps, callback=callback)
    wall = time.perf_counter() - start
    config.update(finished=True, trained_steps=model.num_timesteps, wall_time_s=wall,
                  steps_per_s=model.num_timesteps / wall, eval_time_s=callback.eval_seconds,
                  train_steps_per_s_excluding_eval=model.num_timesteps / max(wall - callback.eval_seconds, 1e-9),
                  policy_repr=str(model.policy))
    dump()
    print(f"finished: {model.num_timesteps} steps in {wall:.0f}s ({model.num_timesteps / wall:.0f} steps/s, "
          f"{callback.eval_seconds:.0f}s evaluating)", flush=True)


if __name__ == "__main__":
    main()
