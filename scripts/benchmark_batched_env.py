"""Speed of nonstationary_envs.BatchedEnv against gymnasium, per environment step, in one process.

Part 1, one thread: BatchedEnv(num_sims=N, nthread=1).step against N gymnasium envs stepped one after the
other through ``env.unwrapped.step`` (also through the wrapped ``env.step``, and the bare physics: a loop of
``mj_step(nstep=frame_skip)`` (+ ``mj_rnePostConstraint`` for Ant) on one MjData per simulation, the floor
any implementation pays). All of them run the same seeds and actions, so the trajectories, and with them
the contacts the physics has to solve, are the same (bit for bit, which tests/modules/test_batched_env.py checks).
Ended episodes are reset inside the timed loops in all of them.

Part 2: Ant, BatchedEnv with nthread 1 against 2, N = 4 and 16.

Each measurement is repeated --repeats times, interleaved (A, B, C, A, B, C, ...), and the median is reported.

    python scripts/benchmark_batched_env.py [--repeats 3] [--seconds 0.6]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nonstationary_envs import BatchedEnv, _without_settotalmass_warning  # noqa: E402


class _BatchRunner:
    def __init__(self, env_id, num_sims, nthread, actions):
        self.env = BatchedEnv(env_id, num_sims=num_sims, nthread=nthread)
        self.env.reset(None, seeds=list(range(num_sims)))
        self.actions, self.t = actions, 0

    def run(self, steps):
        env, actions = self.env, self.actions
        start = time.perf_counter()
        for _ in range(steps):
            _, _, terminated, truncated = env.step(actions[self.t % len(actions)])
            self.t += 1
            done = np.flatnonzero(terminated | truncated)
            if done.size:
                env.reset(done)
        return time.perf_counter() - start


class _GymRunner:
    """N gymnasium envs, stepped one after the other; unwrapped: env.unwrapped.step and our own step count."""

    def __init__(self, env_id, num_sims, actions, unwrapped, max_episode_steps=1000):
        with _without_settotalmass_warning():
            self.envs = [gym.make(env_id) for _ in range(num_sims)]
        for k, env in enumerate(self.envs):
            env.reset(seed=k)
        self.step_fns = [env.unwrapped.step if unwrapped else env.step for env in self.envs]
        self.reset_fns = [env.unwrapped.reset if unwrapped else env.reset for env in self.envs]
        self.unwrapped, self.max_episode_steps = unwrapped, max_episode_steps
        self.elapsed = [0] * num_sims
        self.actions, self.t = actions, 0

    def run(self, steps):
        step_fns, reset_fns, elapsed, actions = self.step_fns, self.reset_fns, self.elapsed, self.actions
        start = time.perf_counter()
        for _ in range(steps):
            row = actions[self.t % len(actions)]
            self.t += 1
            for k, step in enumerate(step_fns):
                _, _, terminated, truncated, _ = step(row[k])
                elapsed[k] += 1
                if self.unwrapped:
                    truncated = elapsed[k] >= self.max_episode_steps
                if terminated or truncated:
                    reset_fns[k]()
                    elapsed[k] = 0
        return time.perf_counter() - start


class _PhysicsRunner:
    """The physics alone: one MjData per simulation, mj_step(nstep=frame_skip) (+ rnePostConstraint for Ant),
    with the episode ends and resets of the others (a gymnasium env per simulation makes the reset state)."""

    def __init__(self, env_id, num_sims, actions, max_episode_steps=1000):
        with _without_settotalmass_warning():
            self.envs = [gym.make(env_id).unwrapped for _ in range(num_sims)]
        self.model, self.frame_skip = self.envs[0].model, self.envs[0].frame_skip
        self.ant = env_id == "Ant-v5"
        self.datas = []
        for k, env in enumerate(self.envs):
            env.reset(seed=k)
            data = mujoco.MjData(self.model)
            mujoco.mj_copyData(data, self.model, env.data)
            self.datas.append(data)
        self.max_episode_steps = max_episode_steps
        self.elapsed = [0] * num_sims
        self.actions, self.t = actions, 0

    def run(self, steps):
        model, frame_skip, ant, datas, elapsed = self.model, self.frame_skip, self.ant, self.datas, self.elapsed
        start = time.perf_counter()
        for _ in range(steps):
            row = self.actions[self.t % len(self.actions)]
            self.t += 1
            for k, data in enumerate(datas):
                data.ctrl[:] = row[k]
                mujoco.mj_step(model, data, nstep=frame_skip)
                if ant:
                    mujoco.mj_rnePostConstraint(model, data)
                elapsed[k] += 1
                z = data.qpos[2]
                if elapsed[k] >= self.max_episode_steps or (ant and not 0.2 <= z <= 1.0):
                    env = self.envs[k]
                    env.reset()
                    mujoco.mj_copyData(data, model, env.data)
                    elapsed[k] = 0
        return time.perf_counter() - start


def _calibrate(runner, seconds):
    """Steps (of all simulations) that take about `seconds`, after a warm-up."""
    elapsed = runner.run(3)
    steps = 3
    while elapsed < 0.1:
        steps *= 2
        elapsed = runner.run(steps)
    return max(3, int(steps * seconds / elapsed))


def _measure(runners, num_sims, repeats, seconds):
    """Interleaved repeats; returns {name: median microseconds per env step (one simulation, one step)}."""
    steps = {name: _calibrate(runner, seconds) for name, runner in runners.items()}
    times = {name: [] for name in runners}
    for _ in range(repeats):
        for name, runner in runners.items():
            times[name].append(runner.run(steps[name]) / (steps[name] * num_sims) * 1e6)
    return {name: statistics.median(values) for name, values in times.items()}, times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.6, help="approximate length of one timed block")
    parser.add_argument("--sims", type=int, nargs="+", default=[4, 16], help="N for part 1")
    args = parser.parse_args(argv)

    print(f"# BatchedEnv benchmark: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, mujoco {mujoco.__version__}, "
          f"gymnasium {gym.__version__}, numpy {np.__version__}")
    print(f"# load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"# median of {args.repeats} interleaved repeats of ~{args.seconds:g} s each; "
          "us = microseconds per env step of one simulation")
    print()
    print("## Part 1: one thread, per env step")
    header = (f"{'env':<15} {'N':>3} {'BatchedEnv':>11} {'unwrapped':>10} {'env.step':>9} {'physics':>8}"
              f" {'unwrapped/batch':>16} {'physics/batch':>14}")
    print(header)
    for env_id in ("HalfCheetah-v5", "Ant-v5"):
        for num_sims in args.sims:
            rng = np.random.default_rng(0)
            nu = 8 if env_id == "Ant-v5" else 6
            actions = rng.uniform(-1, 1, size=(4096, num_sims, nu))
            runners = {
                "batch": _BatchRunner(env_id, num_sims, 1, actions),
                "unwrapped": _GymRunner(env_id, num_sims, actions, unwrapped=True),
                "wrapped": _GymRunner(env_id, num_sims, actions, unwrapped=False),
                "physics": _PhysicsRunner(env_id, num_sims, actions),
            }
            median, _ = _measure(runners, num_sims, args.repeats, args.seconds)
            print(f"{env_id:<15} {num_sims:>3} {median['batch']:>9.1f}us {median['unwrapped']:>8.1f}us"
                  f" {median['wrapped']:>7.1f}us {median['physics']:>6.1f}us"
                  f" {median['unwrapped'] / median['batch']:>15.2f}x {median['physics'] / median['batch']:>13.2f}x",
                  flush=True)
    print()
    print("## Part 2: Ant-v5, BatchedEnv nthread 1 vs 2 (env steps per second, all simulations together)")
    print(f"{'N':>3} {'nthread=1':>12} {'nthread=2':>12} {'speed-up':>9}")
    for num_sims in (4, 16):
        actions = np.random.default_rng(1).uniform(-1, 1, size=(4096, num_sims, 8))
        runners = {nthread: _BatchRunner("Ant-v5", num_sims, nthread, actions) for nthread in (1, 2)}
        median, _ = _measure(runners, num_sims, args.repeats, args.seconds)
        rate = {nthread: 1e6 / us for nthread, us in median.items()}
        print(f"{num_sims:>3} {rate[1]:>8.0f} sps {rate[2]:>8.0f} sps {rate[2] / rate[1]:>8.2f}x", flush=True)
    print()
    print(f"# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
