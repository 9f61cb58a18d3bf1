"""Evaluate a saved policy on its own, with the run's saved observation-normalization statistics.

    python scripts/evaluate.py runs/<run> --task 4 --episodes 10

Loads ``<run-dir>/checkpoint.pt`` (written at every task end, every ``--checkpoint-frequency`` steps and at the
end of a run) and the algorithm script named in ``<run-dir>/config.json``, then runs the paper's evaluation
protocol (deterministic mean action, frozen normalization, env i seeded seed + 100 + i) on the chosen task.
The checkpoint is read with torch.load(weights_only=True), so a file from someone else cannot run code here.

Beside the protocol's return (the action clipped to its bounds, as training and every evaluation of the scripts
clip it), ``return_mean_unclipped`` is the return of the same episodes had the env been given the mean action
unclipped, as ObjectRL's evaluation gives it: the simulator applies the same clamped torque (the actuators are
ctrllimited), and the env charges its control cost on the action it is given, so it is the return less the control
cost beyond the bounds.
"""

import argparse
import dataclasses
import importlib.util
import json
import os
import sys

import numpy as np
import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)


def load_script(name: str):
    """Import an algorithm script as a module (importing it has no side effects)."""
    spec = importlib.util.spec_from_file_location(name[: -len(".py")], os.path.join(REPO_ROOT, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unclipped_returns(env, returns: np.ndarray, lengths: np.ndarray, actions: list) -> tuple:
    """The returns of episodes stepped with ``actions`` clipped to env's bounds, had the env been given them
    unclipped: each less the control cost beyond the bounds of every step it took (episode e took step t when
    t < lengths[e]); and how many action entries lay beyond them. ``actions``: one (episodes, action_dim) array per
    step."""
    low, high = env.single_action_space.low, env.single_action_space.high
    beyond_bounds_cost, entries_beyond = np.zeros(len(returns)), 0
    for step, action in enumerate(actions):
        ran = step < lengths
        cost = env.control_cost(action) - env.control_cost(np.clip(action, low, high))
        beyond_bounds_cost += np.where(ran, cost, 0.0)
        entries_beyond += int(((action < low) | (action > high))[ran].sum())
    return returns - beyond_bounds_cost, entries_beyond


def evaluate_run(run_dir: str, task: int, episodes: int, seed=None) -> dict:
    """Returns of ``episodes`` evaluation episodes of the saved policy on ``task``. The checkpoint is read as the
    scripts read it: tensors and plain values only (weights_only)."""
    config_path, checkpoint_path = os.path.join(run_dir, "config.json"), os.path.join(run_dir, "checkpoint.pt")
    for path in (config_path, checkpoint_path):
        if not os.path.exists(path):
            raise ValueError(f"{path} does not exist: {run_dir} is not a run directory with a checkpoint")
    with open(config_path) as f:
        config = json.load(f)
    script = load_script(config["script"])
    fields = {field.name for field in dataclasses.fields(script.Args)}
    args = script.Args(**{k: v for k, v in config["args"].items() if k in fields})
    args.eval_episodes = episodes
    if seed is not None:
        args.seed = seed
    num_tasks = config["num_tasks"]
    if not 0 <= task < num_tasks:
        raise ValueError(f"--task must be in [0, {num_tasks - 1}] for this run, got {task}")
    if episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {episodes}")
    # The run's own torch thread count: a CPU matmul split over more threads sums in another order, and a
    # 1,000-step episode turns that last-digit difference into a different return (Ant: 1,011 vs 1,016).
    torch.set_num_threads(args.torch_threads)

    # a run directory holds one seed's checkpoint (also when the seed was trained beside others, --num-seeds)
    checkpoint, problem = script.read_checkpoint(checkpoint_path)
    if checkpoint is None:
        raise ValueError(f"{checkpoint_path} cannot be evaluated: {problem}")
    eval_env = script.make_env(args, episodes)  # episode i is simulation i, reset with seed + 100 + i
    obs_dim, action_dim = eval_env.observation_dim, eval_env.action_dim
    # the method's own agent and evaluation action (only the actor's weights are needed for it)
    agent = script.make_agent(args, obs_dim, action_dim, [torch.Generator()], torch.device("cpu"))
    agent.actor.load_state_dict(checkpoint["actor"])
    obs_rms = script.RunningMeanStd(1, (obs_dim,))
    obs_rms.load_state_dict(checkpoint["obs_rms"])
    actions = []  # the mean action of every step, before the protocol clips it: (episodes, action_dim) per step

    def policy(obs):
        action = script.evaluation_action(agent, obs)
        actions.append(action[0].numpy().copy())
        return action

    returns, lengths, _ = script.evaluate_policy(policy, eval_env, task, obs_rms, args, [args.seed],
                                                 torch.device("cpu"))
    returns, lengths = returns[0], lengths[0]
    unclipped, entries_beyond = unclipped_returns(eval_env, returns, lengths, actions)
    description = eval_env.task_description(task)
    return {"global_step": checkpoint["global_step"], "task": task, "task_description": description,
            "episodes": episodes, "return_mean": float(returns.mean()), "return_std": float(returns.std()),
            "return_min": float(returns.min()), "return_max": float(returns.max()),
            "length_mean": float(np.mean(lengths)), "return_mean_unclipped": float(unclipped.mean()),
            "action_entries_beyond_bounds": entries_beyond / (lengths.sum() * eval_env.action_dim)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run directory holding config.json and checkpoint.pt")
    parser.add_argument("--task", type=int, default=0, help="task index of the run's schedule (default 0)")
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes (default 10)")
    parser.add_argument("--seed", type=int, default=None,
                        help="training seed whose +100 seeds the envs (default: the run's)")
    args = parser.parse_args()
    try:
        result = evaluate_run(args.run_dir, args.task, args.episodes, args.seed)
    except ValueError as error:
        parser.error(str(error))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
