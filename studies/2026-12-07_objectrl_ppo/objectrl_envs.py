"""The envs and the evaluation of the ObjectRL adapter (objectrl_ppo.py): our tasks, wrapped and seeded as ObjectRL's
``make_env`` wraps and seeds its envs, the task switched by global step, and our scripts' evaluation protocol.

Nothing here imports ObjectRL, so its tests (tests/studies/test_objectrl_ppo.py) run with the repository's own
requirements: the adapter's training env is our task, step for step, as our scripts' BatchedEnv steps it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import nonstationary_envs  # noqa: E402  (the repository's module, imported from the checkout)


# ---- The envs: ours, wrapped and seeded as ObjectRL's make_env does ----


class GlobalStepTasks(gym.Wrapper):
    """Switches the task by global step as our scripts do (task of step s is s // steps_per_task, set before the
    step, mid-episode), counts the steps taken, and on the first reset after a restore continues the restored
    episode instead of starting one (ObjectRL's train() begins with env.reset())."""

    def __init__(self, env: gym.Env, steps_per_task: int):
        super().__init__(env)
        self.steps_per_task = steps_per_task
        self.steps_taken = 0
        self.last_observation = None
        self.resume_observation = None

    def step(self, action):
        task = self.steps_taken // self.steps_per_task
        if task != self.env.get_wrapper_attr("task_index"):
            self.env.get_wrapper_attr("set_task")(task)
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps_taken += 1
        self.last_observation = observation
        return observation, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.resume_observation is not None:
            observation, self.resume_observation = self.resume_observation, None
            return observation, {}
        observation, info = self.env.reset(**kwargs)
        self.last_observation = observation
        return observation, info


def adapter_make_env(args):
    """A stand-in for objectrl.utils.make_env.make_env with its signature: our env, then ObjectRL's wrapper
    (RescaleAction to [-1, 1]) and ObjectRL's seeding sequence (reset, both spaces, numpy's and torch's global
    RNGs, with seed + 100 for the evaluation env), so that everything ObjectRL draws is seeded as it seeds it."""

    def make_env(env_name, seed, env_config, eval_env=False, num_envs=1):
        if num_envs != 1:
            raise ValueError("the adapter evaluates sequentially (ObjectRL's default, parallelize_eval False)")
        seed = seed + (100 if eval_env else 0)
        env = nonstationary_envs.make_nonstationary_env(args.env_id, args.experiment, args.strategy,
                                                        args.friction_mode)
        if not eval_env:
            env = GlobalStepTasks(env, args.steps_per_task)
        env = gym.wrappers.RescaleAction(env, np.float32(-1.0), np.float32(1.0))
        env.reset(seed=seed)
        env.action_space.seed(seed)
        env.observation_space.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        return env

    return make_env


# ---- The schedule and the evaluation: our scripts' protocol ----


def evaluation_points(steps_per_task: int, num_tasks: int, eval_frequency: int) -> list:
    """Global steps of the paper's evaluations: 0, every eval_frequency steps, and the last step of every task."""
    total = steps_per_task * num_tasks
    return sorted({0, *range(eval_frequency, total + 1, eval_frequency),
                   *(steps_per_task * (i + 1) for i in range(num_tasks))})


def evaluated_task(global_step: int, steps_per_task: int) -> int:
    """The task an evaluation at global_step measures: the task of the step just taken."""
    return max(global_step - 1, 0) // steps_per_task


def evaluate_episodes(agent, eval_env: gym.Env, task: int, seed: int, episodes: int) -> tuple:
    """Undiscounted returns of ``episodes`` episodes with ObjectRL's deterministic action (its select_action with
    is_training=False: the Gaussian's mode), episode i reset with seed + 100 + i, on ``task``: (our protocol's
    returns, ObjectRL's own evaluation's returns).

    Our protocol clips the action to the action space, as our scripts' evaluation (and ObjectRL's training loop) do.
    ObjectRL's own evaluation steps the env with the mode unclipped. The motion is the same either way (the actuators'
    ctrlrange clamps what the simulator applies), but the env charges its control cost on the action it is given, so
    the unclipped return is the clipped one less the control cost of the part beyond the bounds, from one simulation.
    """
    eval_env.get_wrapper_attr("set_task")(task)
    rescale = find_wrapper(eval_env, gym.wrappers.RescaleAction)
    control_cost = eval_env.unwrapped.control_cost
    low, high = eval_env.action_space.low, eval_env.action_space.high
    returns, unclipped_returns = np.zeros(episodes), np.zeros(episodes)
    for i in range(episodes):
        state, _ = eval_env.reset(seed=seed + 100 + i)
        done = False
        while not done:
            mode = agent.select_action(torch.as_tensor(state, dtype=torch.float32), is_training=False)["action"]
            action = mode.cpu().numpy()
            clipped = np.clip(action, low, high)
            state, reward, terminated, truncated, _ = eval_env.step(clipped)
            returns[i] += reward
            beyond_bounds_cost = control_cost(rescale.action(action)) - control_cost(rescale.action(clipped))
            unclipped_returns[i] += reward - beyond_bounds_cost
            done = terminated or truncated
    return returns, unclipped_returns


def find_wrapper(env: gym.Env, kind: type) -> gym.Env:
    """The wrapper (or env) of type ``kind`` in env's chain."""
    while not isinstance(env, kind):
        env = env.env
    return env
