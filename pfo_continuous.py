"""PFO (Proximal Feature Optimization) for continuous control under non-stationary MuJoCo dynamics.

PFO: Moalla et al., "No Representation, No Trust: Connecting Representation, Collapse, and Trust Issues in PPO"
(NeurIPS 2024), https://github.com/CLAIRE-Labo/no-representation-no-trust. PPO plus a feature trust region on the
actor: the loss adds ``feature_coef`` times the squared L2 distance, averaged over units and over the minibatch,
between the actor's last hidden pre-activation features now and those of the rollout policy (EPPO paper,
Appendix B, "PFO details": coefficient 10.0, everything else as PPO). The critic is not regularized.
This file is ``ppo_continuous.py`` with the method's changes, each marked ``# PFO:``
(``diff ppo_continuous.py pfo_continuous.py`` shows the method).

The PPO template's description follows.
Paper: "Evidential Proximal Policy Optimization" (Appendix B, hyperparameter table; Algorithm 1 in black).
CleanRL's reference script: https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_continuous_actionpy

What differs from CleanRL's ``ppo_continuous_action.py`` and why:
- The environment changes every ``steps_per_task`` steps (``nonstationary_envs.py``: slippery floors, paralysed joints).
- Separate actor and critic MLPs [256, 256] with Linear -> LayerNorm -> ReLU and separate Adam optimizers
  (paper, Appendix B), no learning-rate annealing by default (annealing to zero would stop adaptation).
- Correct episode boundaries under gymnasium 1.x: episodes are reset in the same step they end (no junk
  transition) and time-limit truncations bootstrap from the value of the true final observation.
- Observation/reward normalization (running statistics, clipped to +-10) is done in this file on plain arrays
  instead of a wrapper stack, which more than halves the per-step overhead; the critic and the old log-probs are
  computed in one batched forward pass after the rollout instead of once per step.
- The paper's evaluation protocol: deterministic policy on separate environments set to the current task,
  seeded with seed + 100, at step 0, every ``eval_frequency`` steps and at the last step of every task.
- Checkpoint/resume (bit-identical on CPU), preemption handling, validated flags, non-finite-step guards and
  plasticity diagnostics at every task end.
"""

import copy
import csv
import dataclasses
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

import nonstationary_envs
import plasticity_metrics

EXIT_INVALID_CONFIG = 2
EXIT_NONFINITE = 3
EXIT_PREEMPTED = 75
CHECKPOINT_FORMAT = 1
# Args that may change between a run and its resumption without changing the experiment.
RESUME_IGNORED_ARGS = ("overwrite", "cuda", "track", "wandb_project_name", "wandb_entity", "max_nonfinite_skips")


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment (part of the default run directory)"""
    seed: int = 1
    """seed of the experiment (the evaluation environments use seed + 100)"""
    torch_deterministic: bool = True
    """make torch deterministic (`torch.use_deterministic_algorithms`; see README for the CUDA cost)"""
    cuda: bool = True
    """use CUDA when it is available (the default); `--no-cuda` forces the CPU"""
    torch_threads: int = 1
    """torch intra-op threads on the CPU (1 is fastest for these network sizes and keeps results bit-identical)"""
    track: bool = False
    """log to Weights & Biases (group = experiment/env/strategy, job_type = method)"""
    wandb_project_name: str = "eppo"
    """the wandb project name"""
    wandb_entity: Optional[str] = None
    """the wandb entity (team)"""
    run_dir: Optional[str] = None
    """output directory (default `runs/{run_name}`); re-running with an existing run directory resumes it"""
    overwrite: bool = False
    """delete the outputs of a previous run in `run_dir` whose configuration differs, instead of refusing"""

    # Environment and non-stationarity schedule
    env_id: Literal["HalfCheetah-v5", "Ant-v5"] = "HalfCheetah-v5"
    """the MuJoCo environment"""
    experiment: Literal["slippery", "paralysis", "none"] = "paralysis"
    """the non-stationarity: floor friction (slippery), joint torque (paralysis) or none (stationary)"""
    strategy: str = "back-one"
    """slippery: decreasing | increasing; paralysis on Ant: back-one | front-one | back-two | front-two | cross |
    parallel; on HalfCheetah: back-one | front-one | cross-v1 | cross-v2 (ignored when experiment is none)"""
    friction_mode: Literal["floor", "governing"] = "floor"
    """floor: change only the floor's friction (the paper); governing: the floor's friction governs every contact"""
    steps_per_task: int = 500000
    """environment steps per task; total steps = steps_per_task * num_tasks"""
    num_tasks: int = 0
    """number of tasks to run from the start of the schedule (0 = the whole schedule: 15 slippery, 9 paralysis)"""
    max_episode_steps: int = 1000
    """episode length limit (truncation) for training and evaluation"""
    num_envs: int = 1
    """the number of parallel training environments (stepped in this process)"""

    # Evaluation, checkpoints and outputs
    eval_frequency: int = 20000
    """evaluate every this many steps (and at step 0 and at the last step of every task)"""
    eval_episodes: int = 10
    """evaluation episodes per evaluation (run as parallel environments seeded seed + 100 + i)"""
    checkpoint_frequency: int = 100000
    """write `checkpoint.pt` every this many steps (and after every task end); 0 = only at task ends"""
    max_nonfinite_skips: int = 100
    """stop (exit code 3) after this many consecutive minibatch steps with a non-finite loss or gradient"""
    save_states: bool = False
    """store visited observations (float16) in `states.npz` for the exploration (coverage) analysis"""
    save_states_every: int = 10
    """with `--save-states`, keep every n-th training observation"""
    plasticity_states: int = 2000
    """maximum number of evaluation states used for the plasticity metrics"""

    # PPO (paper, Appendix B)
    learning_rate: float = 3e-4
    """Adam learning rate of the actor and of the critic"""
    anneal_lr: bool = False
    """anneal the learning rates linearly to zero over the run (off: it would stop adaptation to late tasks)"""
    num_steps: int = 2048
    """rollout length (horizon) per environment between updates"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda of the generalized advantage estimator"""
    minibatch_size: int = 256
    """minibatch size of the update"""
    update_epochs: int = 10
    """epochs over the rollout per update"""
    norm_adv: bool = True
    """normalize the advantages over the whole batch before the update epochs (Algorithm 1)"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = False
    """clip the value loss like the policy ratio (off in the paper)"""
    ent_coef: float = 0.0
    """coefficient of the entropy bonus"""
    max_grad_norm: float = 0.5
    """maximum gradient norm (clipped separately for actor and critic)"""
    target_kl: Optional[float] = None
    """stop the update epochs early when the approximate KL exceeds this"""
    hidden_dim: int = 256
    """width of the two hidden layers of the actor and of the critic"""
    normalization_clip: float = 10.0
    """normalized observations and rewards are clipped to +- this value"""
    norm_reward: bool = True
    """scale rewards by the running std of the discounted return and clip them (gymnasium's NormalizeReward; the
    paper never mentions it); --no-norm-reward trains on the raw rewards (the statistics are still updated)"""

    # PFO: feature trust region (Moalla et al., 2024; EPPO paper, Appendix B)
    feature_coef: float = 10.0
    """PFO: coefficient of the feature trust-region penalty on the actor's last hidden pre-activations"""


def method_name(args: Args) -> str:
    """The method's name in result tables (sweeps and summaries use it)."""
    return "PFO"  # PFO:


def make_env(args: Args, seed: int) -> gym.Env:
    """One non-stationary environment; the rollout steps ``env.unwrapped`` directly (no wrapper overhead)."""
    env = nonstationary_envs.make_nonstationary_env(
        args.env_id, args.experiment, args.strategy, friction_mode=args.friction_mode
    )
    env.action_space.seed(seed)
    return env


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp_trunk(input_dim: int, hidden_dim: int) -> nn.Sequential:
    """Linear -> LayerNorm -> ReLU, twice (paper, Appendix B)."""
    return nn.Sequential(
        layer_init(nn.Linear(input_dim, hidden_dim)),
        nn.LayerNorm(hidden_dim),
        nn.ReLU(),
        layer_init(nn.Linear(hidden_dim, hidden_dim)),
        nn.LayerNorm(hidden_dim),
        nn.ReLU(),
    )


class Critic(nn.Module):
    def __init__(self, obs_dim: int, hidden_dim: int):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, hidden_dim)
        self.head = layer_init(nn.Linear(hidden_dim, 1), std=1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(x)).squeeze(-1)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate-layer features (post-activation of the last hidden layer), for the plasticity metrics."""
        return self.trunk(x)

    def hidden_activations(self, x: torch.Tensor) -> list:
        """Post-activation outputs of every hidden layer (dormant-unit percentage)."""
        activations = []
        for module in self.trunk:
            x = module(x)
            if isinstance(module, nn.ReLU):
                activations.append(x)
        return activations


class Actor(nn.Module):
    """Diagonal Gaussian policy with a state-independent log standard deviation."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_dim: int):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, hidden_dim)
        self.mean_head = layer_init(nn.Linear(hidden_dim, action_dim), std=0.01)
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mean_head(self.trunk(x))

    features = Critic.features
    hidden_activations = Critic.hidden_activations

    def preactivation_features(self, x: torch.Tensor) -> torch.Tensor:
        """PFO: input of the last ReLU (the last LayerNorm's output), the features PFO keeps close; the original
        code regularizes the last layer's pre-activations by default (feature_trust_use_preactivation)."""
        return self.trunk[:-1](x)

    def mean_from_preactivation(self, preactivation: torch.Tensor) -> torch.Tensor:
        """PFO: the action mean from preactivation_features (the same operations as forward, one trunk pass)."""
        return self.mean_head(torch.relu(preactivation))


def feature_trust_region_penalty(features: torch.Tensor, old_features: torch.Tensor) -> torch.Tensor:
    """PFO: squared L2 distance between the current and the rollout policy's features, averaged over units, then
    over the minibatch (Moalla et al., 2024; ``features_l2`` in their losses.py). Shapes (batch, units)."""
    return (features - old_features).pow(2).mean(-1).mean()


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """log N(actions | mean, exp(log_std)^2) summed over action dimensions (closed form, no torch.distributions)."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    return (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)


def gae(rewards, values, next_values, terminations, dones, gamma: float, gae_lambda: float) -> torch.Tensor:
    """Generalized advantage estimation over a (T, N) rollout.

    ``next_values[t]`` is V(s_{t+1}) of the true next state (the final observation when the episode was
    truncated), ``terminations[t]`` = 1 when s_{t+1} is terminal (its value is 0), ``dones[t]`` = 1 when the
    episode ended at t (termination or truncation), which stops the recursion. The advantage after the buffer's
    last step is 0 (its bootstrap is already in ``next_values``).
    """
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    continues = gamma * gae_lambda * (1.0 - dones)
    advantages = torch.zeros_like(rewards)
    last_advantage = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        last_advantage = deltas[t] + continues[t] * last_advantage
        advantages[t] = last_advantage
    return advantages


class RunningMeanStd:
    """Running mean/variance of a stream of arrays (parallel-variance update, as gymnasium's wrappers)."""

    def __init__(self, shape=(), epsilon: float = 1e-4):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, batch: np.ndarray) -> None:
        batch_count = batch.shape[0]
        # np.var costs ~20 us per call; with one env per step the batch variance is simply 0
        batch_mean, batch_var = (batch[0], 0.0) if batch_count == 1 else (batch.mean(axis=0), batch.var(axis=0))
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total) / total
        self.count = total

    def normalize(self, x: np.ndarray, clip: float) -> np.ndarray:
        """Observation normalization with the current statistics, clipped to +-clip (gymnasium's convention)."""
        normalized = ((x - self.mean) / np.sqrt(self.var + 1e-8)).astype(np.float32)
        return np.minimum(np.maximum(normalized, -clip), clip)  # np.clip's Python wrapper costs more than both

    def state_dict(self) -> dict:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var, self.count = state["mean"].copy(), state["var"].copy(), state["count"]


def evaluation_steps(steps_per_task: int, num_tasks: int, eval_frequency: int) -> list:
    """Global steps at which the paper evaluates: 0, every eval_frequency steps, and the last step of every task."""
    total = steps_per_task * num_tasks
    points = {0, *range(eval_frequency, total + 1, eval_frequency), *(steps_per_task * (i + 1) for i in range(num_tasks))}
    return sorted(points)


def evaluated_task(global_step: int, steps_per_task: int) -> int:
    """The task an evaluation at ``global_step`` measures: the task of the step that was just taken."""
    return max(global_step - 1, 0) // steps_per_task


def evaluate_policy(actor: Actor, eval_envs: list, task: int, obs_rms: RunningMeanStd, args: Args, device,
                    max_states: int = 0):
    """Run one episode per evaluation env with the deterministic (mean) action, on ``task``, with the observation
    statistics frozen; env i is reset with seed + 100 + i (paper, Appendix B), so an evaluation is a function of
    the policy and the statistics only. Returns the undiscounted returns, episode lengths and up to
    ``max_states`` normalized states spread evenly over the episodes (for the plasticity metrics)."""
    frozen_rms = copy.deepcopy(obs_rms)
    for env in eval_envs:
        env.get_wrapper_attr("set_task")(task)
    obs = np.stack([env.unwrapped.reset(seed=args.seed + 100 + i)[0] for i, env in enumerate(eval_envs)])
    low, high = eval_envs[0].action_space.low, eval_envs[0].action_space.high
    returns, lengths = np.zeros(len(eval_envs)), np.zeros(len(eval_envs), dtype=np.int64)
    running = np.ones(len(eval_envs), dtype=bool)
    visited = []
    stride = max(1, math.ceil(len(eval_envs) * args.max_episode_steps / max(max_states, 1)))
    with torch.inference_mode():
        for t in range(args.max_episode_steps):
            if not running.any():
                break
            obs_norm = frozen_rms.normalize(obs, args.normalization_clip)
            if max_states and t % stride == 0:
                visited.append(obs_norm[running])
            actions = np.clip(actor(torch.from_numpy(obs_norm).to(device)).cpu().numpy(), low, high)
            for i in np.flatnonzero(running):
                obs[i], reward, terminated, _, _ = eval_envs[i].unwrapped.step(actions[i])
                returns[i] += reward
                lengths[i] += 1
                running[i] = not terminated and lengths[i] < args.max_episode_steps
    states = np.concatenate(visited)[:max_states] if visited else np.zeros((0, obs.shape[1]), np.float32)
    return returns, lengths, states


def validate_args(args: Args) -> None:
    """Reject a bad configuration up front, with a message that names the flag and the valid range."""
    try:
        nonstationary_envs.validate_setting(args.env_id, args.experiment, args.strategy, args.friction_mode)
    except ValueError as error:
        raise ValueError(f"--env-id/--experiment/--strategy/--friction-mode: {error}") from None
    schedule_length = len(nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy))
    positive = ["steps_per_task", "num_steps", "num_envs", "minibatch_size", "update_epochs", "eval_frequency",
                "eval_episodes", "max_episode_steps", "max_nonfinite_skips", "save_states_every", "hidden_dim",
                "plasticity_states", "torch_threads"]
    for name in positive:
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    if not 0 <= args.num_tasks <= schedule_length:
        raise ValueError(f"--num-tasks must be in [0, {schedule_length}] for {args.experiment}/{args.strategy} "
                         f"(0 = all {schedule_length} tasks), got {args.num_tasks}")
    if args.checkpoint_frequency < 0:
        raise ValueError(f"--checkpoint-frequency must be >= 0 (0 = only at task ends), got {args.checkpoint_frequency}")
    batch_size = args.num_steps * args.num_envs
    if batch_size % args.minibatch_size != 0:
        raise ValueError(f"--minibatch-size {args.minibatch_size} must divide num_steps * num_envs = {batch_size}")
    for name in ("steps_per_task", "eval_frequency"):
        if getattr(args, name) % args.num_envs != 0:
            raise ValueError(f"--{name.replace('_', '-')} must be a multiple of --num-envs {args.num_envs}")
    if not args.learning_rate > 0:
        raise ValueError(f"--learning-rate must be > 0, got {args.learning_rate}")
    if not 0 < args.gamma <= 1 or not 0 <= args.gae_lambda <= 1:
        raise ValueError(f"--gamma must be in (0, 1] and --gae-lambda in [0, 1], got {args.gamma}, {args.gae_lambda}")
    if not args.clip_coef > 0 or not args.max_grad_norm > 0 or not args.normalization_clip > 0:
        raise ValueError("--clip-coef, --max-grad-norm and --normalization-clip must be > 0")
    if args.ent_coef < 0:
        raise ValueError(f"--ent-coef must be >= 0, got {args.ent_coef}")
    if not 0 <= args.feature_coef < math.inf:  # PFO:
        raise ValueError(f"--feature-coef must be a finite number >= 0, got {args.feature_coef}")


def atomic_write_bytes(path: str, write_fn) -> None:
    """Write a file through a temporary file, fsync and rename, so a crash never leaves it half-written."""
    tmp_path = f"{path}.tmp"
    with open(tmp_path, "wb") as f:
        write_fn(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp_path, path)


def save_checkpoint(run_dir: str, state: dict) -> None:
    """Atomically write checkpoint.pt, keeping the previous one as checkpoint.prev.pt until the new one is whole."""
    path = os.path.join(run_dir, "checkpoint.pt")
    atomic_write_bytes(f"{path}.new", lambda f: torch.save(state, f))  # complete on disk before anything moves
    if os.path.exists(path):
        os.replace(path, os.path.join(run_dir, "checkpoint.prev.pt"))
    os.replace(f"{path}.new", path)


def load_checkpoint(run_dir: str) -> Optional[dict]:
    """The newest readable checkpoint (checkpoint.pt, else checkpoint.prev.pt), or None when there is none."""
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        path = os.path.join(run_dir, name)
        if not os.path.exists(path):
            continue
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
            if state.get("format") == CHECKPOINT_FORMAT:
                return state
            warnings.warn(f"{path} has an unknown format; ignoring it")
        except Exception as error:  # a truncated or corrupt file: fall back to the previous checkpoint
            warnings.warn(f"{path} is unreadable ({type(error).__name__}: {error}); trying the previous checkpoint")
    return None


def truncate_csv(path: str, last_step: int) -> None:
    """Drop rows logged after ``last_step`` (they will be logged again, identically, after a resume)."""
    if not os.path.exists(path):
        return
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    kept = [rows[0]] + [row for row in rows[1:] if row and int(row[0]) <= last_step]
    atomic_write_bytes(path, lambda f: f.write("".join(",".join(row) + "\n" for row in kept).encode()))


class CsvLog:
    """Append-only CSV with a header, flushed after every row so a crash never loses a logged row."""

    def __init__(self, path: str, header: list):
        new = not os.path.exists(path)
        self.file = open(path, "a", newline="")
        self.writer = csv.writer(self.file)
        if new:
            self.writer.writerow(header)
            self.file.flush()

    def write(self, row: list) -> None:
        self.writer.writerow(row)
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def run_metadata() -> dict:
    """Git commit and package versions for config.json."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                                capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    import mujoco

    return {"git_commit": commit, "python": sys.version.split()[0], "torch": torch.__version__,
            "gymnasium": gym.__version__, "mujoco": mujoco.__version__, "numpy": np.__version__}


def prepare_run_dir(args: Args, run_dir: str, config_args: dict) -> None:
    """Create the run directory, check it is writable with some free space, and refuse a foreign config."""
    try:
        os.makedirs(run_dir, exist_ok=True)
        probe = os.path.join(run_dir, ".write_probe")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as error:
        raise ValueError(f"--run-dir {run_dir} is not writable: {error}") from None
    free_mb = shutil.disk_usage(run_dir).free / 2**20
    if free_mb < 100:
        raise ValueError(f"--run-dir {run_dir}: only {free_mb:.0f} MiB free on its disk (need at least 100 MiB)")
    config_path = os.path.join(run_dir, "config.json")
    if not os.path.exists(config_path):
        return
    with open(config_path) as f:
        previous = json.load(f)["args"]
    differing = sorted(k for k in set(previous) | set(config_args)
                       if k not in RESUME_IGNORED_ARGS and previous.get(k) != config_args.get(k))
    if not differing:
        return
    if not args.overwrite:
        detail = ", ".join(f"{k}: {previous.get(k)!r} -> {config_args.get(k)!r}" for k in differing)
        raise ValueError(f"--run-dir {run_dir} holds a run with a different configuration ({detail}); "
                         "use another --run-dir or pass --overwrite to delete its outputs")
    for name in os.listdir(run_dir):
        if name in ("config.json", "evaluations.csv", "plasticity.csv", "states.npz", "summary.json", "checkpoint.pt",
                    "checkpoint.prev.pt", "wandb_id.txt") or name.startswith("events.out.tfevents"):
            os.remove(os.path.join(run_dir, name))


if __name__ == "__main__":
    import tyro
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    args = tyro.cli(Args)
    run_name = f"{args.env_id}__{args.experiment}__{args.strategy}__{args.exp_name}__{args.seed}"
    run_dir = args.run_dir or os.path.join("runs", run_name)
    config_args = dataclasses.asdict(args)
    try:
        validate_args(args)
        prepare_run_dir(args, run_dir, config_args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_INVALID_CONFIG)
    if os.path.exists(os.path.join(run_dir, "summary.json")):
        print(f"{run_dir} already holds a finished run (summary.json); nothing to do.")
        sys.exit(0)

    schedule = nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy)
    num_tasks = args.num_tasks or len(schedule)
    total_steps = args.steps_per_task * num_tasks
    batch_size = args.num_steps * args.num_envs
    num_iterations = math.ceil(total_steps / batch_size)

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    if args.torch_deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # Environments: training envs seeded seed + i, evaluation envs seed + 100 + i (paper, Appendix B)
    envs = [make_env(args, args.seed + i) for i in range(args.num_envs)]
    eval_envs = [make_env(args, args.seed + 100 + i) for i in range(args.eval_episodes)]
    obs_dim = envs[0].observation_space.shape[0]
    action_dim = envs[0].action_space.shape[0]
    action_low, action_high = envs[0].action_space.low, envs[0].action_space.high

    actor = Actor(obs_dim, action_dim, args.hidden_dim).to(device)
    critic = Critic(obs_dim, args.hidden_dim).to(device)
    # fused Adam: one kernel over all parameters, ~8% faster per minibatch on the CPU than the default loop
    actor_optimizer = optim.Adam(actor.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    critic_optimizer = optim.Adam(critic.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    obs_rms = RunningMeanStd((obs_dim,))
    return_rms = RunningMeanStd(())

    # Per-environment episode state (kept here, not in wrappers, so that it can be checkpointed)
    discounted_return = np.zeros(args.num_envs)
    episode_return = np.zeros(args.num_envs)
    episode_length = np.zeros(args.num_envs, dtype=np.int64)
    global_step, iteration, task_index = 0, 0, 0
    nonfinite_skips_total, consecutive_nonfinite = 0, 0
    timers = {"wall": 0.0, "eval": 0.0, "plasticity": 0.0}  # seconds, accumulated over resumed sessions
    saved_states, saved_state_steps = [], []

    checkpoint = load_checkpoint(run_dir)
    if checkpoint is None:
        for name in os.listdir(run_dir):  # leftovers of an earlier attempt that never wrote a checkpoint
            if name in ("evaluations.csv", "plasticity.csv", "states.npz") or name.startswith("events.out.tfevents"):
                os.remove(os.path.join(run_dir, name))
        raw_obs = np.stack([env.unwrapped.reset(seed=args.seed + i)[0] for i, env in enumerate(envs)])
        obs_rms.update(raw_obs)
    else:
        actor.load_state_dict(checkpoint["actor"])
        critic.load_state_dict(checkpoint["critic"])
        actor_optimizer.load_state_dict(checkpoint["actor_optimizer"])
        critic_optimizer.load_state_dict(checkpoint["critic_optimizer"])
        obs_rms.load_state_dict(checkpoint["obs_rms"])
        return_rms.load_state_dict(checkpoint["return_rms"])
        for env, env_state in zip(envs, checkpoint["env_states"]):
            nonstationary_envs.set_env_state(env, env_state)
        raw_obs = checkpoint["raw_obs"]
        discounted_return, episode_return, episode_length = (checkpoint[k].copy() for k in
                                                             ("discounted_return", "episode_return", "episode_length"))
        global_step, iteration, task_index = checkpoint["global_step"], checkpoint["iteration"], checkpoint["task_index"]
        nonfinite_skips_total = checkpoint["nonfinite_skips_total"]
        timers = checkpoint["timers"]
        random.setstate(checkpoint["rng"]["python"])
        np.random.set_state(checkpoint["rng"]["numpy"])
        torch.set_rng_state(checkpoint["rng"]["torch"])
        if device.type == "cuda" and checkpoint["rng"]["cuda"] is not None:
            torch.cuda.set_rng_state_all(checkpoint["rng"]["cuda"])
        for name in ("evaluations.csv", "plasticity.csv"):
            truncate_csv(os.path.join(run_dir, name), global_step)
        states_path = os.path.join(run_dir, "states.npz")
        if args.save_states and os.path.exists(states_path):
            with np.load(states_path) as saved:
                keep = saved["global_steps"] <= global_step
                saved_states, saved_state_steps = [saved["observations"][keep]], [saved["global_steps"][keep]]
        print(f"resuming {run_dir} from global_step {global_step} (task {task_index})")
    for env in envs:
        env.get_wrapper_attr("set_task")(task_index)

    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump({"args": config_args, "script": os.path.basename(__file__), "method": method_name(args),
                   "run_name": run_name, "num_tasks": num_tasks, "total_steps": total_steps,
                   "schedule": [str(p) for p in schedule[:num_tasks]], **run_metadata()}, f, indent=2)
    if args.track:
        import wandb

        wandb_id_path = os.path.join(run_dir, "wandb_id.txt")
        if not os.path.exists(wandb_id_path):
            with open(wandb_id_path, "w") as f:
                f.write(wandb.util.generate_id())
        with open(wandb_id_path) as f:
            wandb_id = f.read().strip()
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, sync_tensorboard=True,
                   config=config_args, name=run_name, id=wandb_id, resume="allow", dir=run_dir,
                   group=f"{args.experiment}/{args.env_id}/{args.strategy}", job_type=method_name(args))
    # purge_step drops TensorBoard points logged after the checkpoint, so a resumed run has no duplicates
    writer = SummaryWriter(run_dir, purge_step=global_step if checkpoint else None)
    if checkpoint is None:
        writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in config_args.items()))
    evaluations_log = CsvLog(os.path.join(run_dir, "evaluations.csv"),
                             ["global_step", "task", "episodes", "return_mean", "return_std", "return_min", "return_max"])
    plasticity_log = CsvLog(os.path.join(run_dir, "plasticity.csv"),
                            ["global_step", "task", "network", "effective_rank", "stable_rank", "dormant_percent"])

    # SIGTERM (SLURM preemption) and SIGINT (Ctrl-C) stop the run at the next update boundary with a checkpoint
    stop_signal = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, frame: stop_signal.append(received))

    def evaluate(step: int) -> None:
        """The paper's protocol: deterministic actions, frozen normalization, envs on the evaluated task."""
        eval_start = time.perf_counter()
        task = evaluated_task(step, args.steps_per_task)
        measure_plasticity = step == 0 or step % args.steps_per_task == 0
        returns, lengths, visited = evaluate_policy(actor, eval_envs, task, obs_rms, args, device,
                                                    args.plasticity_states if measure_plasticity else 0)
        evaluations_log.write([step, task, len(returns), returns.mean(), returns.std(), returns.min(), returns.max()])
        writer.add_scalar("eval/episodic_return", returns.mean(), step)
        writer.add_scalar("eval/episodic_length", lengths.mean(), step)
        timers["eval"] += time.perf_counter() - eval_start
        last_eval["return"] = returns.mean()
        message = f"eval step={step} task={task} return={returns.mean():.1f} +- {returns.std():.1f}"
        (progress.write if progress else print)(message)
        if measure_plasticity:
            plasticity_start = time.perf_counter()
            states = torch.from_numpy(visited).to(device)
            with torch.inference_mode():
                for network_name, network in (("critic", critic), ("actor", actor)):
                    activations = network.hidden_activations(states)
                    metrics = {"effective_rank": plasticity_metrics.effective_rank(activations[-1]),
                               "stable_rank": plasticity_metrics.stable_rank(activations[-1]),
                               "dormant_percent": plasticity_metrics.dormant_unit_percentage(activations)}
                    for key, value in metrics.items():
                        writer.add_scalar(f"plasticity/{network_name}_{key}", value, step)
                    plasticity_log.write([step, task, network_name, *metrics.values()])
            timers["plasticity"] += time.perf_counter() - plasticity_start

    def write_checkpoint() -> None:
        state = {
            "format": CHECKPOINT_FORMAT, "args": config_args, "global_step": global_step, "iteration": iteration,
            "task_index": task_index, "actor": actor.state_dict(), "critic": critic.state_dict(),
            "actor_optimizer": actor_optimizer.state_dict(), "critic_optimizer": critic_optimizer.state_dict(),
            "obs_rms": obs_rms.state_dict(), "return_rms": return_rms.state_dict(),
            "env_states": [nonstationary_envs.get_env_state(env) for env in envs], "raw_obs": raw_obs.copy(),
            "discounted_return": discounted_return, "episode_return": episode_return, "episode_length": episode_length,
            "nonfinite_skips_total": nonfinite_skips_total, "timers": dict(timers),
            "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if device.type == "cuda" else None},
        }
        save_checkpoint(run_dir, state)
        if args.save_states and saved_states:
            observations, steps = np.concatenate(saved_states), np.concatenate(saved_state_steps)
            saved_states[:], saved_state_steps[:] = [observations], [steps]
            atomic_write_bytes(os.path.join(run_dir, "states.npz"),
                               lambda f: np.savez_compressed(f, observations=observations, global_steps=steps))

    # Rollout buffers live on the CPU during the rollout (one copy to the device per update)
    obs_buffer = np.zeros((args.num_steps, args.num_envs, obs_dim), np.float32)
    next_obs_buffer = np.zeros((args.num_steps, args.num_envs, obs_dim), np.float32)
    actions_buffer = np.zeros((args.num_steps, args.num_envs, action_dim), np.float32)
    rewards_buffer = np.zeros((args.num_steps, args.num_envs), np.float32)
    terminations_buffer = np.zeros((args.num_steps, args.num_envs), np.float32)
    dones_buffer = np.zeros((args.num_steps, args.num_envs), np.float32)

    eval_points = [s for s in evaluation_steps(args.steps_per_task, num_tasks, args.eval_frequency) if s > global_step]
    last_eval = {"return": float("nan")}
    progress = None
    session_start, session_start_step = time.perf_counter(), global_step
    session_timers_start = dict(timers)
    wall_mark = session_start
    if checkpoint is None:
        evaluate(0)
    progress = tqdm(total=total_steps, initial=global_step, unit="step", dynamic_ncols=True, disable=None)
    obs = obs_rms.normalize(raw_obs, args.normalization_clip)
    final_raw_obs = {}  # env index -> final observation of an episode that ended in this step
    next_checkpoint = global_step + args.checkpoint_frequency if args.checkpoint_frequency else math.inf
    exit_code = 0

    while global_step < total_steps:
        iteration += 1
        if args.anneal_lr:
            for optimizer in (actor_optimizer, critic_optimizer):
                optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / num_iterations)

        # ---- Rollout ----
        log_std = actor.log_std.detach()
        action_std = torch.exp(log_std)
        task_ended = False
        steps_collected = 0
        # one inference-mode context for the whole rollout: entering it per step costs ~20 us
        with torch.inference_mode():
            for step in range(args.num_steps):
                step_task = global_step // args.steps_per_task
                if step_task != task_index:
                    task_index = step_task
                    for env in envs:
                        env.get_wrapper_attr("set_task")(task_index)
                    writer.add_scalar("task/index", task_index, global_step)
                    progress.write(f"step {global_step}: task {task_index} "
                                   f"({envs[0].get_wrapper_attr('task_description')()})")
                obs_buffer[step] = obs
                mean = actor(torch.from_numpy(obs).to(device))
                action = (mean + action_std * torch.randn_like(mean)).cpu().numpy()
                actions_buffer[step] = action
                clipped_action = np.clip(action, action_low, action_high)
                global_step += args.num_envs
                for i, env in enumerate(envs):
                    next_raw_obs, reward, terminated, _, _ = env.unwrapped.step(clipped_action[i])
                    episode_return[i] += reward
                    episode_length[i] += 1
                    # gymnasium's NormalizeReward: scale by the std of the discounted return, reset only on termination
                    discounted_return[i] = discounted_return[i] * args.gamma * (1.0 - terminated) + reward
                    rewards_buffer[step, i] = reward
                    terminations_buffer[step, i] = terminated
                    done = terminated or episode_length[i] >= args.max_episode_steps
                    dones_buffer[step, i] = done
                    raw_obs[i] = next_raw_obs
                    if done:
                        # The env restarts in the same step, so the buffer holds no junk transition; the true final
                        # observation is kept for next_obs_buffer (a truncation bootstraps from its value).
                        final_raw_obs[i] = next_raw_obs
                        writer.add_scalar("charts/episodic_return", episode_return[i], global_step)
                        writer.add_scalar("charts/episodic_length", episode_length[i], global_step)
                        episode_return[i], episode_length[i] = 0.0, 0
                        raw_obs[i] = env.unwrapped.reset()[0]
                return_rms.update(discounted_return)
                if args.norm_reward:
                    scaled_reward = rewards_buffer[step] / np.sqrt(return_rms.var + 1e-8)
                    rewards_buffer[step] = np.minimum(np.maximum(scaled_reward, -args.normalization_clip),
                                                      args.normalization_clip)
                obs_rms.update(raw_obs)
                obs = obs_rms.normalize(raw_obs, args.normalization_clip)
                next_obs_buffer[step] = obs
                for i, final in final_raw_obs.items():
                    next_obs_buffer[step, i] = obs_rms.normalize(final, args.normalization_clip)
                final_raw_obs.clear()
                if args.save_states and (global_step // args.num_envs) % args.save_states_every == 0:
                    saved_states.append(raw_obs.astype(np.float16))
                    saved_state_steps.append(np.full(args.num_envs, global_step))
                steps_collected += 1
                if eval_points and global_step >= eval_points[0]:
                    progress.update(global_step - progress.n)
                    task_ended |= global_step % args.steps_per_task == 0
                    evaluate(eval_points.pop(0))
                if global_step >= total_steps:
                    break
        progress.update(global_step - progress.n)
        if steps_collected < args.num_steps or global_step >= total_steps:
            break  # the run ends with this rollout; an update would not be evaluated any more

        # ---- Advantages ----
        b_obs = torch.from_numpy(obs_buffer).to(device)
        b_actions = torch.from_numpy(actions_buffer).to(device)
        with torch.no_grad():
            values = critic(b_obs)
            next_values = critic(torch.from_numpy(next_obs_buffer).to(device))
            # PFO: the rollout policy's features, from the same batched pass as the old log-probs (the actor does
            # not change during the rollout, so these equal the features it had when it acted)
            old_features = actor.preactivation_features(b_obs)
            old_log_probs = gaussian_log_prob(b_actions, actor.mean_from_preactivation(old_features), actor.log_std)
            advantages = gae(torch.from_numpy(rewards_buffer).to(device), values, next_values,
                             torch.from_numpy(terminations_buffer).to(device),
                             torch.from_numpy(dones_buffer).to(device), args.gamma, args.gae_lambda)
            returns = advantages + values

        # ---- Update ----
        b_obs = b_obs.reshape(batch_size, obs_dim)
        b_actions = b_actions.reshape(batch_size, action_dim)
        b_old_log_probs, b_advantages = old_log_probs.reshape(-1), advantages.reshape(-1)
        b_old_features = old_features.reshape(batch_size, -1)  # PFO:
        b_returns, b_values = returns.reshape(-1), values.reshape(-1)
        if args.norm_adv:  # Algorithm 1, line 19: normalized over the whole batch, once, after the returns
            b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)
        # PFO: a sixth entry, the feature distance
        loss_sums = torch.zeros(6, device=device)  # policy, value, entropy, old approx kl, approx kl, feature distance
        clipfrac_sum = torch.zeros((), device=device)
        critic_max_grad = 0.0
        minibatch_steps, skipped_this_update, skip_reasons = 0, 0, set()
        for epoch in range(args.update_epochs):
            permutation = torch.randperm(batch_size, device=device)
            for start in range(0, batch_size, args.minibatch_size):
                mb = permutation[start : start + args.minibatch_size]
                features = actor.preactivation_features(b_obs[mb])  # PFO:
                new_log_probs = gaussian_log_prob(b_actions[mb], actor.mean_from_preactivation(features), actor.log_std)
                log_ratio = new_log_probs - b_old_log_probs[mb]
                ratio = log_ratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-log_ratio).mean()
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clipfrac_sum += ((ratio - 1.0).abs() > args.clip_coef).float().mean()
                mb_advantages = b_advantages[mb]
                pg_loss = torch.max(-mb_advantages * ratio,
                                    -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
                entropy = gaussian_entropy(actor.log_std)
                feature_distance = feature_trust_region_penalty(features, b_old_features[mb])  # PFO:
                actor_loss = pg_loss - args.ent_coef * entropy + args.feature_coef * feature_distance

                new_values = critic(b_obs[mb])
                if args.clip_vloss:
                    clipped_values = b_values[mb] + torch.clamp(new_values - b_values[mb], -args.clip_coef, args.clip_coef)
                    v_loss = torch.max((new_values - b_returns[mb]) ** 2, (clipped_values - b_returns[mb]) ** 2).mean()
                else:
                    v_loss = ((new_values - b_returns[mb]) ** 2).mean()  # Algorithm 1: plain MSE
                critic_loss = v_loss

                actor_optimizer.zero_grad(set_to_none=True)
                critic_optimizer.zero_grad(set_to_none=True)
                (actor_loss + critic_loss).backward()  # disjoint parameters: one backward serves both
                critic_grad_max = plasticity_metrics.max_abs_gradient(critic)
                actor_grad_norm = nn.utils.clip_grad_norm_(actor.parameters(), args.max_grad_norm)
                critic_grad_norm = nn.utils.clip_grad_norm_(critic.parameters(), args.max_grad_norm)
                # One host sync per minibatch: skip the step when any loss or gradient is not finite
                finite = torch.stack([actor_loss, critic_loss, actor_grad_norm, critic_grad_norm]).isfinite()
                if not bool(finite.all()):
                    names = np.array(["actor_loss", "critic_loss", "actor_grad", "critic_grad"])
                    skip_reasons.update(names[~finite.cpu().numpy()])
                    skipped_this_update += 1
                    consecutive_nonfinite += 1
                    if consecutive_nonfinite >= args.max_nonfinite_skips:
                        break
                    continue
                consecutive_nonfinite = 0
                actor_optimizer.step()
                critic_optimizer.step()
                minibatch_steps += 1
                critic_max_grad = max(critic_max_grad, critic_grad_max)
                loss_sums += torch.stack([pg_loss, v_loss, entropy, old_approx_kl, approx_kl, feature_distance]).detach()
            if consecutive_nonfinite >= args.max_nonfinite_skips:
                break
            if args.target_kl is not None and approx_kl.item() > args.target_kl:
                break

        # ---- Logging ----
        if skipped_this_update:
            nonfinite_skips_total += skipped_this_update
            warnings.warn(f"step {global_step}: skipped {skipped_this_update} minibatch step(s) with non-finite "
                          f"{', '.join(sorted(skip_reasons))}")
        writer.add_scalar("charts/nonfinite_skips", nonfinite_skips_total, global_step)
        if minibatch_steps:
            pg_mean, v_mean, entropy_mean, old_kl_mean, kl_mean, feature_distance_mean = (
                loss_sums / minibatch_steps).tolist()  # PFO:
            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            writer.add_scalar("charts/learning_rate", actor_optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/value_loss", v_mean, global_step)
            writer.add_scalar("losses/policy_loss", pg_mean, global_step)
            writer.add_scalar("losses/entropy", entropy_mean, global_step)
            writer.add_scalar("losses/old_approx_kl", old_kl_mean, global_step)
            writer.add_scalar("losses/approx_kl", kl_mean, global_step)
            writer.add_scalar("pfo/feature_distance", feature_distance_mean, global_step)  # PFO:
            writer.add_scalar("losses/clipfrac", clipfrac_sum.item() / minibatch_steps, global_step)
            writer.add_scalar("losses/explained_variance", np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y,
                              global_step)
            writer.add_scalar("plasticity/critic_max_abs_grad", critic_max_grad, global_step)
        now = time.perf_counter()
        timers["wall"] += now - wall_mark
        wall_mark = now
        session_time = now - session_start
        session_overhead = sum(timers[k] - session_timers_start[k] for k in ("eval", "plasticity"))
        sps = (global_step - session_start_step) / max(session_time - session_overhead, 1e-9)
        writer.add_scalar("charts/SPS", sps, global_step)
        progress.set_postfix(task=task_index, sps=f"{sps:.0f}", eval=f"{last_eval['return']:.0f}", refresh=False)

        # ---- Checkpoint ----
        if consecutive_nonfinite >= args.max_nonfinite_skips:
            write_checkpoint()
            print(f"error: {consecutive_nonfinite} consecutive minibatch steps had a non-finite loss or gradient "
                  f"({', '.join(sorted(skip_reasons))}) at step {global_step}; stopped with a checkpoint of the last "
                  "finite state. Lower the learning rate or inspect the run before resuming.", file=sys.stderr)
            exit_code = EXIT_NONFINITE
            break
        if stop_signal:
            write_checkpoint()
            progress.write(f"received signal {stop_signal[0]}: checkpoint written at step {global_step}; "
                           f"re-run the same command to resume (exit code {EXIT_PREEMPTED})")
            exit_code = EXIT_PREEMPTED
            break
        if task_ended or global_step >= next_checkpoint:
            write_checkpoint()
            while next_checkpoint <= global_step:
                next_checkpoint += args.checkpoint_frequency

    progress.close()
    timers["wall"] += time.perf_counter() - wall_mark
    train_time = timers["wall"] - timers["eval"] - timers["plasticity"]
    if exit_code == 0:
        write_checkpoint()  # the final networks and normalization statistics, for scripts/evaluate.py
        summary = {"status": "finished", "global_step": global_step, "train_sps": global_step / max(train_time, 1e-9),
                   "wall_time_s": timers["wall"], "train_time_s": train_time, "eval_time_s": timers["eval"],
                   "plasticity_time_s": timers["plasticity"], "nonfinite_skips": nonfinite_skips_total}
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        print(f"finished {run_dir}: {global_step} steps, train SPS {summary['train_sps']:.0f}, "
              f"eval {timers['eval']:.1f} s")
    evaluations_log.close()
    plasticity_log.close()
    writer.close()
    if args.track:
        wandb.finish()
    sys.exit(exit_code)
