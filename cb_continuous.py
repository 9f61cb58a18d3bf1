"""CB (PPO with continual backpropagation) for continuous control under non-stationary MuJoCo dynamics.

CB: Dohare et al., "Loss of plasticity in deep continual learning" (Nature, 2024), https://github.com/shibhansh/
loss-of-plasticity: PPO plus generate-and-test on every hidden layer and L2 regularization (EPPO paper, Appendix B,
"CB details"; docs/baselines.md). This file is the PPO template, ppo_continuous.py, with the method's changes, each
marked ``# CB:`` (``diff ppo_continuous.py cb_continuous.py`` shows the method).

Read top to bottom: the flags, the networks, the policy and its rewards, the math, then the phases of one
iteration (advantages, update with the loss of one minibatch, logging) and a short main. Below the marker line is
the plumbing that every *_continuous.py shares byte for byte (seeds, environments, evaluation, checkpoints,
outputs, command line). The names this half calls from it (mlp_trunk, StackedLinear, SeedwiseAdam, time_major,
minibatches, optimizer_step, record, initial_parameters, ...), each with its contract and section, head
docs/reading-guide.md, which also says what is where and how to add a method.
"""

import contextlib
import copy
import csv
import dataclasses
import difflib
import errno
import fcntl
import functools
import io
import itertools
import json
import math
import os
import pickle
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.adam import adam as adam_update

import nonstationary_envs
import plasticity_metrics

# CB: (maturity threshold, replacement rate) from the paper's grid search per (experiment, environment) (Appendix B,
# "CB details"; docs/baselines.md), and the values of a setting it did not search (its Ant values)
PAPER_CB_VALUES = {("slippery", "Ant"): (1000, 1e-4), ("slippery", "HalfCheetah"): (1000, 1e-5),
                   ("paralysis", "Ant"): (1000, 1e-4), ("paralysis", "HalfCheetah"): (10000, 1e-5)}
FALLBACK_CB_VALUES = (1000, 1e-4)


@dataclass
class Args:
    """CB's flags first, then PPO's (paper, Appendix B), then the run's settings."""

    # CB: continual backpropagation (Dohare et al., 2024; EPPO paper, Appendix B: per-setting values in
    # docs/baselines.md); --utility-decay and --reset-optimizer-state: where the paper and the official code differ
    replacement_rate: Optional[float] = None
    """CB: fraction of the eligible (mature) units of each hidden layer replaced per minibatch step; default: the
    paper's for the setting (Appendix B, "CB details": 1e-5 on HalfCheetah, 1e-4 on Ant)"""
    maturity_threshold: Optional[int] = None
    """CB: a unit is eligible for replacement when it has lived more than this many minibatch steps; default: the
    paper's for the setting (Appendix B, "CB details": 10000 on HalfCheetah paralysis, else 1000)"""
    utility_decay: float = 0.99
    """CB: decay rate eta of the contribution utility's moving average (original code 0.99; the paper's table 1e-4)"""
    weight_decay: float = 1e-4
    """CB: L2 regularization coefficient (Adam's weight_decay, added to the gradient as in the original code)"""
    reset_optimizer_state: bool = True
    """CB: zero the Adam moments of a replaced unit's weights (the official RL script skips this; see
    docs/baselines.md)"""

    def __post_init__(self):
        # CB: without --maturity-threshold / --replacement-rate, the paper's values for the setting (default_cb_values;
        # config.json stores the values), as EPPO takes its kappa
        maturity_threshold, replacement_rate, _ = default_cb_values(self)
        if self.maturity_threshold is None:
            self.maturity_threshold = maturity_threshold
        if self.replacement_rate is None:
            self.replacement_rate = replacement_rate

    # PPO's hyperparameters (paper, Appendix B)
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
    gae_across_truncations: bool = False
    """run the GAE recursion on across a time-limit truncation into the next episode, stopping it only at a
    termination (ObjectRL's code, not the paper); off: it stops at every episode end"""
    minibatch_size: int = 256
    """minibatch size of the update"""
    update_epochs: int = 10
    """epochs over the rollout per update"""
    shuffle_minibatches: bool = True
    """each epoch's minibatches from a fresh random permutation of the batch (CleanRL, SB3); --no-shuffle-minibatches:
    in buffer order (time order), the same every epoch (ObjectRL's code)"""
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
    joint_optimizer: bool = False
    """train actor and critic as one Adam does (SB3, CleanRL): on actor loss + --vf-coef x critic loss with one
    gradient-norm clip over both networks; off: each network its own loss and clip (Algorithm 1 updates theta and
    phi separately)"""
    vf_coef: float = 0.5
    """with --joint-optimizer, the critic loss's coefficient in the joint loss (SB3's and CleanRL's 0.5)"""
    target_kl: Optional[float] = None
    """stop the update epochs early when the approximate KL exceeds this"""
    hidden_dim: int = 256
    """width of the two hidden layers of the actor and of the critic"""
    activation: Literal["relu", "tanh"] = "relu"
    """activation of the hidden layers (the paper: ReLU; CleanRL and Stable-Baselines3: tanh)"""
    layer_norm: Literal["affine", "plain", "none"] = "affine"
    """LayerNorm before each hidden activation: with learnable gain and shift (affine: the paper's LayerNorm, as
    nn.LayerNorm), without them (plain: the authors' ObjectRL, elementwise_affine=False) or none (CleanRL, SB3)"""
    init: Literal["orthogonal", "torch"] = "orthogonal"
    """weight initialization: orthogonal with CleanRL's gains (sqrt(2) hidden, 1 value head, --policy-head-gain)
    and zero biases; torch: nn.Linear's own default, uniform in +-1/sqrt(fan_in) for weights and biases (ObjectRL)"""
    policy_head_gain: float = 0.01
    """orthogonal gain of the policy's mean head (CleanRL and SB3: 0.01; applies to --init orthogonal)"""
    log_std_init: float = -1.0
    """initial log standard deviation of the policy, the same for every action dimension (-1: std 0.37, ObjectRL's:
    docs/ppo.md)"""
    log_std_max: Optional[float] = None
    """clamp the policy's log standard deviation at this value, with no gradient above it (ObjectRL: -1); None: no
    clamp"""
    learn_log_std: bool = True
    """learn the log standard deviation (a parameter of the actor); --no-learn-log-std keeps --log-std-init"""
    norm_obs: bool = False
    """feed the networks observations normalized by their running mean and std, clipped (gymnasium's
    NormalizeObservation; the paper never mentions it, ObjectRL has none); off: the raw observations (the running
    statistics are still kept)"""
    normalization_clip: float = 10.0
    """normalized observations and rewards are clipped to +- this value"""
    norm_reward: bool = True
    """scale rewards by the running std of the discounted return and clip them (gymnasium's NormalizeReward; the
    paper never mentions it, ObjectRL has none; this default's history: CHANGELOG.md); --no-norm-reward: the raw
    rewards (the statistics are still updated)"""

    # ---- The run's settings, the same in every script (scripts/sync_plumbing.py copies them) ----
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment (part of the default run directory)"""
    seed: int = 1
    """seed of the experiment (the evaluation environments use seed + 100)"""
    num_seeds: int = 1
    """train seeds seed, seed + 1, ..., seed + num_seeds - 1 in this process as independent agents (batched)"""
    torch_deterministic: bool = True
    """make torch deterministic (`torch.use_deterministic_algorithms`; see docs/long-runs.md for the CUDA cost)"""
    cuda: bool = True
    """use CUDA when it is available and --num-seeds >= 8 (faster there: docs/batched-seeds.md); an explicit
    `--cuda` forces CUDA whatever the number of seeds, `--no-cuda` forces the CPU"""
    torch_threads: int = 1
    """torch intra-op threads on the CPU (1 is fastest for these network sizes and keeps results bit-identical)"""
    track: bool = False
    """log to Weights & Biases (group = experiment/env/strategy, job_type = method)"""
    wandb_project_name: str = "eppo"
    """the wandb project name"""
    wandb_entity: Optional[str] = None
    """the wandb entity (team)"""
    run_dir: Optional[str] = None
    """output directory (default `runs/{run_name}`), `{seed}` in it is replaced by each seed (required with
    --num-seeds > 1); re-running with an existing run directory resumes it"""
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
    include_cfrc_ext_in_observation: bool = True
    """Ant-v5: keep its 78 contact-force entries in the observation (gymnasium's default, 105 entries);
    --no-include-cfrc-ext-in-observation gives the 27 of positions and velocities (the reward is unchanged)"""
    num_envs: int = 1
    """the number of parallel training environments per seed (stepped in this process)"""
    env_threads: int = 0
    """threads that step the simulations of all seeds (mujoco.batch, GIL released); results do not depend on it;
    0 = the CPUs this process may use (os.sched_getaffinity), at most one per simulation"""

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


def method_name(args: Args) -> str:
    """The method's name in result tables (sweeps and summaries use it)."""
    return "CB"  # CB:


def run_tag(args: Args) -> str:
    """The method's part of the default run directory's name."""
    return args.exp_name


def default_cb_values(args: Args) -> tuple[int, float, str]:
    """CB: the maturity threshold and replacement rate of a run without the flags, and where they come from: the
    paper's grid search per experiment and environment (Appendix B, "CB details"), else the Ant values."""
    env_name = args.env_id.split("-")[0]
    if (args.experiment, env_name) in PAPER_CB_VALUES:
        return (*PAPER_CB_VALUES[args.experiment, env_name],
                f"the paper's for {args.experiment}/{env_name}, Appendix B")
    return (*FALLBACK_CB_VALUES, "the paper searched none for this setting; the flags set them")


def cb_note(args: Args) -> str:
    """CB: the run header's note on the maturity threshold and the replacement rate, and where each comes from."""
    maturity_threshold, replacement_rate, source = default_cb_values(args)
    return (f"maturity threshold {args.maturity_threshold} "
            f"({source if args.maturity_threshold == maturity_threshold else '--maturity-threshold'}), "
            f"replacement rate {args.replacement_rate:g} "
            f"({source if args.replacement_rate == replacement_rate else '--replacement-rate'})")


def validate_method(args: Args) -> None:
    """The checks of PPO's flags, then of the method's own, after validate_args' of the run's: check_flags raises
    ValueError naming the flag and its valid range."""
    check_flags(args, {
        "update_epochs hidden_dim": "a positive integer", "learning_rate clip_coef": "> 0", "ent_coef": ">= 0",
        "gamma": "in (0, 1]", "gae_lambda": "in [0, 1]",
        "vf_coef": (lambda value: value > 0 and (args.joint_optimizer or value == Args.vf_coef),
                    "> 0 and applies to --joint-optimizer only"),
        "policy_head_gain": (lambda value: 0 < value < math.inf, "a finite number > 0"),
        "log_std_init log_std_max": (lambda value: value is None or math.isfinite(value), "a finite number")})
    if args.init == "torch" and args.policy_head_gain != Args.policy_head_gain:
        raise ValueError("--policy-head-gain applies to --init orthogonal only (--init torch draws the head as "
                         "every layer)")
    if args.target_kl is not None and args.num_seeds > 1:
        raise ValueError("--target-kl stops the update epochs of the whole process: use --num-seeds 1 with it")
    check_flags(args, {"replacement_rate": "in [0, 1]", "maturity_threshold": ">= 0",  # CB:
                       "utility_decay": (lambda value: 0 <= value < 1, "in [0, 1)"),
                       "weight_decay": "a finite number >= 0"})


# ---- Networks: one actor and one critic per seed (K stacked copies; the layers are below the marker) ----


class Critic(nn.Module):
    """Value network: (seeds, samples, obs_dim) -> (seeds, samples)."""

    def __init__(self, obs_dim: int, args: Args, generators: list):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, args, generators)
        self.head = layer_init(StackedLinear(len(generators), args.hidden_dim, 1), generators, std=1.0, init=args.init)

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
            if isinstance(module, HIDDEN_ACTIVATIONS):
                activations.append(x)
        return activations


class Actor(nn.Module):
    """Diagonal Gaussian policy with a state-independent log standard deviation: forward gives the mean,
    action_log_std() the log std that the policy uses (the parameter, clamped at --log-std-max)."""

    def __init__(self, obs_dim: int, action_dim: int, args: Args, generators: list):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, args, generators)
        self.mean_head = layer_init(StackedLinear(len(generators), args.hidden_dim, action_dim), generators,
                                    std=args.policy_head_gain, init=args.init)
        self.log_std = nn.Parameter(torch.full((len(generators), 1, action_dim), args.log_std_init),
                                    requires_grad=args.learn_log_std)
        self.log_std_max = args.log_std_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mean_head(self.trunk(x))

    def action_log_std(self) -> torch.Tensor:
        # ObjectRL's upper clamp: no gradient reaches a log std above the bound
        return self.log_std if self.log_std_max is None else self.log_std.clamp(max=self.log_std_max)

    features = Critic.features
    hidden_activations = Critic.hidden_activations


# CB: SeedwiseAdam's per-entry moment buffers (its per-seed step counts are left as they are, as torch.optim.Adam's
# step count was in the one-seed script)
ADAM_MOMENT_KEYS = ("exp_avg", "exp_avg_sq")
# CB: rate * eligible summed up to a whole number can land ~1e-16 below it; far below any real fraction of a unit
PENDING_TOLERANCE = 1e-6


def contribution_utility(hidden_activation: torch.Tensor, outgoing_weight: torch.Tensor) -> torch.Tensor:
    """CB: instantaneous contribution utility of every unit of a hidden layer (Dohare et al., 2024, Methods;
    util_type 'contribution' in gnt.py): batch mean of |h_j| times the mean over outgoing weights of |W[k, j]|.
    hidden_activation: (..., batch, units) post-activation output; outgoing_weight: (..., next_units, units);
    leading axes (the seeds) are kept: (..., units)."""
    return hidden_activation.abs().mean(-2) * outgoing_weight.abs().mean(-2)


def fresh_weights(layer: "StackedLinear", generator: torch.Generator, init: str = "orthogonal",
                  gain: float = np.sqrt(2)) -> torch.Tensor:
    """CB: fresh weights (out, in) of the shape of one seed's slice of ``layer``, drawn on the CPU from ``generator``
    as mlp_trunk's layer_init draws a hidden layer (--init: orthogonal with gain ``gain``, or nn.Linear's uniform)."""
    _, out_features, in_features = layer.weight.shape
    return layer_init(StackedLinear(1, in_features, out_features), [generator], std=gain, init=init).weight.detach()[0]


class GenerateAndTest:
    """CB: continual backpropagation's generate-and-test (Dohare et al., 2024) on every hidden layer of one
    stacked MLP, every seed on its own (docs/baselines.md details each step). ``step(hidden_activations,
    stepping)`` runs after every optimizer step with that minibatch's post-activation outputs, (seeds, batch,
    units) per layer: the stepped seeds' units age, their contribution utilities enter a bias-corrected moving
    average, and the mature units of lowest utility are re-initialized (incoming weights from the layer's
    initialization, --init, with the seed's generator, outgoing weights 0, optionally zero Adam moments)."""

    def __init__(self, trunk: nn.Sequential, head: "StackedLinear", optimizer: optim.Optimizer, generators: list,
                 replacement_rate: float, maturity_threshold: int, utility_decay: float, init_gain: float = np.sqrt(2),
                 reset_optimizer_state: bool = True, init: str = "orthogonal"):
        # Hidden layer i: incoming linears[i], normalization layer_norms[i] (None without one: --layer-norm none),
        # outgoing linears[i + 1]; found by type, so every layout of mlp_trunk's (--layer-norm, --activation) works.
        # init_gain and init: layer_init's default gain and --init, as mlp_trunk draws every hidden layer.
        self.linears, self.layer_norms = [], []
        for module in trunk:
            if isinstance(module, StackedLinear):
                self.linears.append(module)
                self.layer_norms.append(None)
            elif isinstance(module, StackedLayerNorm):
                if not self.linears or self.layer_norms[-1] is not None:
                    raise ValueError("expected at most one LayerNorm after each hidden Linear layer")
                self.layer_norms[-1] = module
        self.linears.append(head)
        if len(generators) != len(head.weight):
            raise ValueError(f"expected one generator per seed ({len(head.weight)}), got {len(generators)}")
        self.optimizer, self.generators = optimizer, generators
        self.replacement_rate, self.maturity_threshold = float(replacement_rate), int(maturity_threshold)
        self.utility_decay, self.init_gain, self.init = float(utility_decay), float(init_gain), init
        self.reset_optimizer_state = reset_optimizer_state
        num_seeds, device = len(generators), head.weight.device
        # Utilities live on the network's device. Ages stay on the CPU, so deciding how many units to replace
        # never waits for the GPU: a step syncs only when it replaces units.
        self.utilities = [torch.zeros(num_seeds, layer.weight.shape[1], device=device) for layer in self.linears[:-1]]
        self.ages = [torch.zeros(num_seeds, layer.weight.shape[1], dtype=torch.long) for layer in self.linears[:-1]]
        self.pending_replacements = np.zeros((num_seeds, len(self.utilities)))  # per seed and hidden layer

    def bias_corrected_utilities(self, layer: int, seed_index: int,
                                 units: Optional[torch.Tensor] = None) -> torch.Tensor:
        """u / (1 - decay^age) of the given units of a hidden layer of one seed (all units when None); per seed,
        as a vectorized pow may round a seed's entries differently at another offset of a stacked tensor."""
        ages, utilities = self.ages[layer][seed_index], self.utilities[layer][seed_index]
        if units is not None:
            ages, utilities = ages[units], utilities[units.to(utilities.device)]
        correction = 1.0 - torch.tensor(self.utility_decay, dtype=torch.float64) ** ages.double()
        # a just-replaced unit (age 0) has utility 0: dividing by 1 keeps it 0 instead of 0 / 0
        correction = correction.masked_fill(ages == 0, 1.0)
        return utilities / correction.to(utilities.device, utilities.dtype)

    @torch.no_grad()
    def step(self, hidden_activations: list, stepping: Optional[np.ndarray] = None) -> np.ndarray:
        """One generate-and-test step (after an optimizer step) for the seeds where ``stepping`` is True (all when
        None); returns the number of units replaced per seed, (seeds,)."""
        if len(hidden_activations) != len(self.utilities):
            raise ValueError(f"expected {len(self.utilities)} hidden activations, got {len(hidden_activations)}")
        num_seeds = len(self.generators)
        stepping = np.ones(num_seeds, bool) if stepping is None else np.asarray(stepping, bool)
        stepping_cpu = torch.from_numpy(stepping)[:, None]
        replaced = np.zeros(num_seeds, np.int64)
        for layer, activation in enumerate(hidden_activations):
            self.ages[layer] += stepping_cpu
            # Three separately rounded operations (no fused multiply-add), so that a seed's utilities round alike
            # at every offset of the stacked tensor
            utilities = (self.utilities[layer] * self.utility_decay + contribution_utility(
                activation, self.linears[layer + 1].weight) * (1.0 - self.utility_decay))
            if stepping.all():
                self.utilities[layer] = utilities
            else:
                self.utilities[layer] = torch.where(stepping_cpu.to(utilities.device), utilities,
                                                    self.utilities[layer])
            mature = (self.ages[layer] > self.maturity_threshold).sum(1).tolist()
            for k in np.flatnonzero(stepping):
                if mature[k] == 0:
                    continue
                # fractions carry over, so small rates still replace rate * eligible units per step on average
                self.pending_replacements[k, layer] += self.replacement_rate * mature[k]
                count = min(math.floor(self.pending_replacements[k, layer] + PENDING_TOLERANCE), mature[k])
                if count == 0:
                    continue
                self.pending_replacements[k, layer] -= count
                eligible = torch.nonzero(self.ages[layer][k] > self.maturity_threshold).squeeze(1)
                # stable sort: ties go to the lower index, the same on CPU and GPU
                lowest = torch.argsort(self.bias_corrected_utilities(layer, k, eligible), stable=True)[:count]
                self._replace(layer, k, eligible[lowest.cpu()])
                replaced[k] += count
        return replaced

    def _replace(self, layer: int, seed_index: int, units: torch.Tensor) -> None:
        """Re-initialize ``units`` of hidden layer ``layer`` of seed ``seed_index`` only."""
        incoming, outgoing, layer_norm = self.linears[layer], self.linears[layer + 1], self.layer_norms[layer]
        k, index, device = seed_index, units.to(incoming.weight.device), incoming.weight.device
        # Rows of a fresh orthogonal matrix of the layer's shape have exactly the distribution the layer's rows had
        # at initialization (layer_init), also for the first layer, whose rows are not unit vectors (out > in); with
        # --init torch, rows of a fresh nn.Linear draw. Drawn on the CPU from this seed's generator, as layer_init
        # draws them. The bias is 0 under either init, as in the original code (gnt.py zeroes it under every init).
        fresh = fresh_weights(incoming, self.generators[k], self.init, self.init_gain)
        incoming.weight[k, index] = fresh.to(device)[index]
        incoming.bias[k, 0, index] = 0.0
        touched = [(incoming.weight, (k, index)), (incoming.bias, (k, 0, index))]
        if layer_norm is not None and layer_norm.affine:  # the unit's gain and shift (--layer-norm affine only)
            layer_norm.weight[k, 0, index] = 1.0
            layer_norm.bias[k, 0, index] = 0.0
            touched += [(layer_norm.weight, (k, 0, index)), (layer_norm.bias, (k, 0, index))]
        outgoing.weight[k, :, index] = 0.0
        touched.append((outgoing.weight, (k, slice(None), index)))
        self.utilities[layer][k, index] = 0.0
        self.ages[layer][k, units] = 0
        if self.reset_optimizer_state:
            for parameter, entries in touched:
                state = self.optimizer.state.get(parameter, {})
                for key in ADAM_MOMENT_KEYS:
                    if key in state:
                        state[key][entries] = 0.0

    def state_dict(self) -> dict:
        """A flat dict of tensors with the seed axis first (like a module's), so that checkpoints split it by seed
        and checkpoint comparisons treat it as one more network."""
        state = {"pending_replacements": torch.from_numpy(self.pending_replacements.copy())}
        for layer, (utility, age) in enumerate(zip(self.utilities, self.ages)):
            state[f"utilities.{layer}"], state[f"ages.{layer}"] = utility.clone(), age.clone()
        return state

    def load_state_dict(self, state: dict) -> None:
        expected = {"pending_replacements", *(f"{key}.{layer}" for key in ("utilities", "ages")
                                              for layer in range(len(self.utilities)))}
        if set(state) != expected:
            raise ValueError(f"generate-and-test state has keys {sorted(state)}, expected {sorted(expected)}")
        for layer in range(len(self.utilities)):
            self.utilities[layer].copy_(state[f"utilities.{layer}"])
            self.ages[layer].copy_(state[f"ages.{layer}"])
        self.pending_replacements = state["pending_replacements"].numpy().astype(np.float64)


def make_agent(args: Args, obs_dim: int, action_dim: int, generators: list, device: torch.device):
    """Everything the method learns or keeps between updates; the checkpoint saves each entry by its name.
    Separate actor and critic with separate Adam optimizers (paper, Appendix B); the reward normalizer's
    statistics and each env's discounted return (training_reward)."""
    actor = Actor(obs_dim, action_dim, args, generators).to(device)
    critic = Critic(obs_dim, args, generators).to(device)
    # CB: L2 regularization through Adam's weight_decay (gradient += weight_decay * weight), on every parameter
    actor_optimizer = SeedwiseAdam(actor.parameters(), lr=args.learning_rate, eps=1e-5, weight_decay=args.weight_decay)
    critic_optimizer = SeedwiseAdam(critic.parameters(), lr=args.learning_rate, eps=1e-5,
                                    weight_decay=args.weight_decay)
    # CB: one generate-and-test per network: the actor's mean network (trunk and mean head) and the critic
    settings = dict(generators=generators, replacement_rate=args.replacement_rate, utility_decay=args.utility_decay,
                    maturity_threshold=args.maturity_threshold, reset_optimizer_state=args.reset_optimizer_state,
                    init=args.init)
    return Agent(actor=actor, critic=critic,
                 actor_optimizer=actor_optimizer, critic_optimizer=critic_optimizer,  # CB: + generate-and-test
                 return_rms=RunningMeanStd(len(generators), ()),
                 discounted_return=np.zeros((len(generators), args.num_envs)),
                 actor_generate_and_test=GenerateAndTest(actor.trunk, actor.mean_head, actor_optimizer, **settings),
                 critic_generate_and_test=GenerateAndTest(critic.trunk, critic.head, critic_optimizer, **settings))


# ---- The policy and the rewards it trains on (called by the rollout and the evaluation below the marker) ----


def rollout_policy(agent, args: Args, generators: list, device: torch.device):
    """Algorithm 1, line 3: a ~ N(actor(s), exp(log_std)^2). The noise of the whole rollout is drawn up front,
    each seed's from its own generator, (T, seeds, envs, action_dim). Returns ``act(obs, step)``: the actions of
    rollout step ``step`` for the normalized observations (seeds, envs, obs_dim), as a tensor."""
    action_std = torch.exp(agent.actor.action_log_std().detach())
    noise_shape = (args.num_steps, args.num_envs, agent.actor.log_std.shape[-1])
    action_noise = torch.stack([torch.randn(noise_shape, generator=generator) for generator in generators],
                               dim=1).to(device)
    return lambda obs, step: agent.actor(obs) + action_std * action_noise[step]


def evaluation_action(agent, obs: torch.Tensor) -> torch.Tensor:
    """The evaluation's deterministic action: the policy's mean (paper, Appendix B)."""
    return agent.actor(obs)


def training_reward(agent, reward: np.ndarray, terminated: np.ndarray, args: Args) -> np.ndarray:
    """The reward of one step that the update trains on, (seeds, envs); the rollout keeps the raw one too.
    gymnasium's NormalizeReward (the paper never mentions it): scale by the running std of each env's discounted
    return, which restarts only on termination, and clip; --no-norm-reward trains on the raw reward (the
    statistics are still updated)."""
    agent.discounted_return = agent.discounted_return * args.gamma * (1.0 - terminated) + reward
    agent.return_rms.update(agent.discounted_return)
    if not args.norm_reward:
        return reward
    scaled_reward = reward.astype(np.float32) / np.sqrt(agent.return_rms.var + 1e-8)
    return np.minimum(np.maximum(scaled_reward, -args.normalization_clip), args.normalization_clip)


# ---- The math (pure functions; written for one seed, the sample axis last) ----


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """log N(actions | mean, exp(log_std)^2) summed over action dimensions (closed form, no torch.distributions)."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    return (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)


def gae(rewards, values, next_values, terminations, dones, gamma: float, gae_lambda: float) -> torch.Tensor:
    """Generalized advantage estimation over a (T, ...) rollout (time first; any trailing seed/env axes).

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


def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """(A - mean) / (std + 1e-8) over the samples (last axis) of each seed: Algorithm 1, line 19. Each seed's row
    is not made contiguous first (CB: as its results were recorded; ppo_continuous.py says why PPO does)."""
    return (advantages - advantages.mean(-1, keepdim=True)) / (advantages.std(-1, keepdim=True) + 1e-8)


def ppo_loss(agent, mb, args: Args) -> tuple:
    """The losses of one minibatch (Algorithm 1, lines 23-24, 26), per seed: the clipped surrogate (plus the entropy
    bonus) for the actor and the squared error for the critic; and what is logged of them."""
    log_std = agent.actor.action_log_std()
    actor_activations = agent.actor.hidden_activations(mb["obs"])  # CB: every hidden layer's output, for GnT
    new_log_probs = gaussian_log_prob(mb["actions"], agent.actor.mean_head(actor_activations[-1]), log_std)
    log_ratio = new_log_probs - mb["old_log_probs"]
    ratio = log_ratio.exp()
    pg_loss = torch.max(-mb["advantages"] * ratio,
                        -mb["advantages"] * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean(-1)
    entropy = gaussian_entropy(log_std).squeeze(-1)
    actor_loss = pg_loss - args.ent_coef * entropy

    critic_activations = agent.critic.hidden_activations(mb["obs"])  # CB:
    new_values = agent.critic.head(critic_activations[-1]).squeeze(-1)
    if args.clip_vloss:
        clipped_values = mb["values"] + torch.clamp(new_values - mb["values"], -args.clip_coef, args.clip_coef)
        v_loss = torch.max((new_values - mb["returns"]) ** 2, (clipped_values - mb["returns"]) ** 2).mean(-1)
    else:
        v_loss = ((new_values - mb["returns"]) ** 2).mean(-1)  # Algorithm 1: plain MSE
    critic_loss = args.vf_coef * v_loss if args.joint_optimizer else v_loss

    with torch.no_grad():
        stats = {"policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy,
                 "old_approx_kl": (-log_ratio).mean(-1), "approx_kl": ((ratio - 1) - log_ratio).mean(-1),
                 "clipfrac": ((ratio - 1.0).abs() > args.clip_coef).float().mean(-1)}
    return {"actor": actor_loss, "critic": critic_loss}, stats, (actor_activations, critic_activations)  # CB:


# ---- One iteration: rollout (below the marker), advantages, update, logging ----


def compute_advantages(run, rollout, args: Args) -> dict:
    """Algorithm 1, lines 4-19 as PPO reads them (EPPO's 5-7, 10, 14-16 and 18 aside): the values of the visited and
    of the true next states, GAE, the returns and the normalized advantages; the old log-probs for the ratio.
    Returns the batch, (seeds, samples, ...) tensors."""
    agent = run.agent
    with torch.no_grad():
        values = agent.critic(rollout.obs).reshape(rollout.shape)
        next_values = agent.critic(rollout.next_obs).reshape(rollout.shape)
        old_log_probs = gaussian_log_prob(rollout.actions, agent.actor(rollout.obs), agent.actor.action_log_std())
        # where GAE's recursion stops: every episode end, or only terminations (--gae-across-truncations)
        gae_stops = rollout.terminations if args.gae_across_truncations else rollout.dones
        # gae runs over time first: (T, seeds, envs) views of the (seeds, T, envs) rollout
        advantages = time_major(gae(time_major(rollout.rewards), time_major(values), time_major(next_values),
                                    time_major(rollout.terminations), time_major(gae_stops), args.gamma,
                                    args.gae_lambda))
        returns = advantages + values
    batch = {"obs": rollout.obs, "actions": rollout.actions, "old_log_probs": old_log_probs,
             "advantages": flat(advantages), "returns": flat(returns), "values": flat(values)}
    if args.norm_adv:  # Algorithm 1, line 19: normalized over each seed's whole batch, once, after the returns
        batch["advantages"] = normalize_advantages(batch["advantages"])
    return batch


def update(run, batch: dict, args: Args) -> dict:
    """Algorithm 1, lines 20-33: update_epochs passes over the batch in minibatches, one step of each optimizer
    per minibatch (each seed's own minibatch; a seed whose loss or gradient is not finite skips its step).
    Returns what log_update logs: each seed's means of the minibatch statistics, {name: (seeds,)}."""
    # CB: and the units generate-and-test replaced per seed in this update, of the actor and of the critic
    replaced = {"actor_replaced_units": np.zeros(len(run.seeds), np.int64),
                "critic_replaced_units": np.zeros(len(run.seeds), np.int64)}
    for epoch in range(args.update_epochs):
        for mb in minibatches(run, batch):  # none left once the run must stop (non-finite steps in a row)
            losses, stats, (actor_activations, critic_activations) = ppo_loss(run.agent, mb, args)  # CB:
            stepped = optimizer_step(run, losses)
            # CB: generate-and-test after every optimizer step, on this minibatch's hidden outputs (stepped seeds)
            replaced["actor_replaced_units"] += run.agent.actor_generate_and_test.step(actor_activations, stepped)
            replaced["critic_replaced_units"] += run.agent.critic_generate_and_test.step(critic_activations, stepped)
            record(run, stats, stepped)
        if args.target_kl is not None and stats["approx_kl"].item() > args.target_kl:  # one seed (validate_method)
            break
    return {**update_means(run), **replaced}  # CB: + replaced


def log_update(run, batch: dict, means: dict) -> None:
    """CleanRL's charts/ and losses/ tags: each seed's means over the minibatch steps it took in this update."""
    y_pred, y_true = batch["values"].cpu().numpy(), batch["returns"].cpu().numpy()
    action_std = torch.exp(run.agent.actor.action_log_std().detach()).mean((1, 2)).cpu().numpy()
    # CB: diagnostics, each seed's mean utility, actor and critic
    utility = [mean_utility(run.agent.actor_generate_and_test), mean_utility(run.agent.critic_generate_and_test)]
    for k, log in updated_seeds(run):
        var_y = np.var(y_true[k])
        log("charts/learning_rate", run.agent.actor_optimizer.param_groups[0]["lr"])
        log("charts/action_std", action_std[k])  # the policy's std, mean over action dimensions
        for name in ("value_loss", "policy_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac"):
            log(f"losses/{name}", means[name][k])
        log("losses/explained_variance", np.nan if var_y == 0 else 1 - np.var(y_true[k] - y_pred[k]) / var_y)
        # CB: replacements in this update, and utilities (actor and critic apart: their scales differ)
        log("cb/replaced_units", means["actor_replaced_units"][k] + means["critic_replaced_units"][k])
        log("cb/actor_replaced_units", means["actor_replaced_units"][k])
        log("cb/critic_replaced_units", means["critic_replaced_units"][k])
        log("cb/actor_mean_utility", utility[0][k])
        log("cb/critic_mean_utility", utility[1][k])


def set_learning_rate(run, args: Args) -> None:
    """--anneal-lr: linearly to zero over the run (CleanRL); off by default."""
    if args.anneal_lr:
        for optimizer in (run.agent.actor_optimizer, run.agent.critic_optimizer):
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (run.iteration - 1.0) / run.num_iterations)


def main(argv: list) -> int:
    args = parse_args(argv)
    run = start_run(args, argv, notes=[cb_note(args)])  # CB: + the values used and where they come from
    while run.next_iteration():  # False when the run is done or must stop (signal, too many non-finite steps)
        set_learning_rate(run, args)
        rollout = collect_rollout(run)  # evaluates, changes tasks and logs episodes on the way
        if rollout is None:  # the run ended inside this rollout: an update would not be evaluated any more
            break
        batch = compute_advantages(run, rollout, args)
        outputs = update(run, batch, args)  # what the update produced, for log_update
        log_update(run, batch, outputs)
        end_iteration(run)  # the shared logs, then a checkpoint when one is due
    return finish_run(run)


# ---- CB: the diagnostics, the cb/ tags; they are logged, nothing trains on them ----


def mean_utility(gnt: GenerateAndTest) -> list:
    """CB: each seed's mean bias-corrected utility over all hidden units of one network's generate-and-test (one
    host sync: call once per update)."""
    return torch.stack([torch.cat([gnt.bias_corrected_utilities(i, k) for i in range(len(gnt.utilities))]).mean()
                        for k in range(len(gnt.generators))]).tolist()


# ==== The plumbing: from this line to the end, every *_continuous.py is byte-identical (a test checks it) ====
# Seeds, environments, evaluation, checkpoints, outputs and the command line. The contract with the method above
# (docs/reading-guide.md): it defines METHOD_FUNCTIONS, its Args has METHOD_ARGS (the method fields read here) and
# its Agent AGENT_FIELDS, plus agent.{name}_optimizer for each loss that optimizer_step steps.

METHOD_FUNCTIONS = ("method_name", "run_tag", "validate_method", "make_agent", "rollout_policy", "evaluation_action",
                    "training_reward", "compute_advantages", "update", "log_update", "set_learning_rate", "main")
METHOD_ARGS = ("num_steps", "minibatch_size", "max_grad_norm", "joint_optimizer", "normalization_clip", "norm_obs",
               "hidden_dim", "activation", "layer_norm", "init", "shuffle_minibatches")
AGENT_FIELDS = ("actor", "critic", "critic_optimizer")
EXIT_INVALID_CONFIG = 2
EXIT_NONFINITE = 3
EXIT_PREEMPTED = 75
EXIT_DISK_FULL = 74  # a file of the run could not be written (sysexits.h's EX_IOERR): not requeued, as 75 is
RELEASE = "v0.4"  # the generation of defaults (CHANGELOG.md), recorded in config.json next to the commit
CHECKPOINT_FORMAT = 5  # tensors and plain values only: torch.load(weights_only=True) runs no code
# Args that may change between a run and its resumption without changing the experiment
RESUME_IGNORED_ARGS = ("overwrite", "cuda", "track", "wandb_project_name", "wandb_entity", "max_nonfinite_skips",
                       "num_seeds", "run_dir", "env_threads")
CUDA_MIN_SEEDS = 8  # from this many seeds up the default trains on CUDA (docs/batched-seeds.md)
PROGRESS_NOTE_SECONDS = 300  # without a terminal, a progress line at least this often
CSV_LOGS = {"evaluations.csv": ["global_step", "task", "episodes", "return_mean", "return_std", "return_min",
                                "return_max"],
            "plasticity.csv": ["global_step", "task", "network", "effective_rank", "stable_rank", "dormant_percent"]}
LOGGED_FILES = (*CSV_LOGS, "states.npz")  # and events.out.tfevents.*: what a run logs as it goes
RUN_FILES = (*LOGGED_FILES, "config.json", "summary.json", "checkpoint.pt", "checkpoint.prev.pt", "wandb_id.txt")


# ---- Seeds stacked in one process: layers, optimizer, normalization ----


def aligned(x: torch.Tensor) -> torch.Tensor:
    """x itself when its data starts on a 64-byte boundary, else an aligned copy (MKL rounds misaligned data apart)."""
    return x if x.data_ptr() % 64 == 0 else x.clone()


class AlignedGradient(torch.autograd.Function):
    """The identity, whose backward hands the layer below an aligned gradient (a slice of the stacked one)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return aligned(grad)


class StackedLinear(nn.Module):
    """One ``nn.Linear`` per seed, (seeds, samples, in) -> (seeds, samples, out); on the CPU one F.linear per seed."""

    def __init__(self, num_seeds: int, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_seeds, out_features, in_features))
        self.bias = nn.Parameter(torch.empty(num_seeds, 1, out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_cuda:
            return torch.baddbmm(self.bias, x, self.weight.transpose(1, 2))
        if len(x) == 1:  # one seed: the same F.linear on views (no splitting, stacking or zero-filled gradients)
            return F.linear(x.squeeze(0), self.weight.squeeze(0), self.bias.view(-1)).unsqueeze(0)
        outputs = [F.linear(aligned(x_k), aligned(weight_k), bias_k[0])
                   for x_k, weight_k, bias_k in zip(x.unbind(0), self.weight.unbind(0), self.bias.unbind(0))]
        if torch.is_grad_enabled():
            outputs = [AlignedGradient.apply(output) for output in outputs]
        return torch.stack(outputs)


class StackedLayerNorm(nn.Module):
    """One ``nn.LayerNorm`` per seed (``affine=False``: without gain and shift, no parameters)."""

    def __init__(self, num_seeds: int, dim: int, affine: bool = True):
        super().__init__()
        if affine:
            self.weight = nn.Parameter(torch.ones(num_seeds, 1, dim))
            self.bias = nn.Parameter(torch.zeros(num_seeds, 1, dim))
        self.affine = affine

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normalized = F.layer_norm(x, x.shape[-1:])
        return torch.addcmul(self.bias, normalized, self.weight) if self.affine else normalized


def layer_init(layer: StackedLinear, generators: list, std: float = np.sqrt(2), bias_const: float = 0.0,
               init: str = "orthogonal") -> StackedLinear:
    """CleanRL's orthogonal init or nn.Linear's own (``init``), seed k's slice from seed k's generator."""
    layer.initializer = (std, bias_const, init)
    with torch.no_grad():
        if init == "torch":
            bound = 1.0 / math.sqrt(layer.weight.shape[-1])
            for weight, bias, generator in zip(layer.weight, layer.bias, generators):
                torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
                torch.nn.init.uniform_(bias, -bound, bound, generator=generator)
            return layer
        for weight, generator in zip(layer.weight, generators):
            torch.nn.init.orthogonal_(weight, std, generator=generator)
        layer.bias.fill_(bias_const)
    return layer


def fresh_draw(layer: StackedLinear, generator: torch.Generator) -> tuple:
    """A fresh (weight, bias) of ``layer``'s own initializer from ``generator``, on the CPU: for re-initialization."""
    std, bias_const, init = layer.initializer
    _, out_features, in_features = layer.weight.shape
    fresh = layer_init(StackedLinear(1, in_features, out_features), [generator], std, bias_const, init)
    return fresh.weight.detach()[0], fresh.bias.detach()[0, 0]


def hidden_layers(network: nn.Module) -> list:
    """(incoming StackedLinear, its StackedLayerNorm or None, outgoing StackedLinear) per hidden layer."""
    linears, layer_norms = [], []
    for module in network.trunk:
        if isinstance(module, StackedLinear):
            linears.append(module)
            layer_norms.append(None)
        elif isinstance(module, StackedLayerNorm):
            layer_norms[-1] = module
    heads = [module for name, module in network.named_children()
             if name != "trunk" and isinstance(module, StackedLinear)]
    if len(heads) != 1:
        raise ValueError(f"{type(network).__name__} has {len(heads)} output layers besides its trunk; expected one")
    linears.append(heads[0])
    return [(linears[i], layer_norms[i], linears[i + 1]) for i in range(len(layer_norms))]


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}  # --activation; hidden_activations() collects their outputs
HIDDEN_ACTIVATIONS = tuple(ACTIVATIONS.values())


def mlp_trunk(input_dim: int, args, generators: list) -> nn.Sequential:
    """Linear -> LayerNorm -> ReLU, twice (paper, Appendix B), or the readings --layer-norm, --activation, --init."""
    num_seeds, width = len(generators), args.hidden_dim
    layers = []
    for in_features in (input_dim, width):
        layers.append(layer_init(StackedLinear(num_seeds, in_features, width), generators, init=args.init))
        if args.layer_norm != "none":
            layers.append(StackedLayerNorm(num_seeds, width, affine=args.layer_norm == "affine"))
        layers.append(ACTIVATIONS[args.activation]())
    return nn.Sequential(*layers)


def single_seed_network(network: nn.Module, seed_index: int) -> nn.Module:
    """A copy of a stacked network that holds only seed ``seed_index``'s parameters (a one-seed network)."""
    single = copy.deepcopy(network)
    for parameter, source in zip(single.parameters(), network.parameters()):
        parameter.data = source.data[seed_index : seed_index + 1].clone()
    return single


def initial_parameters(network: nn.Module) -> dict:
    """A copy of ``network``'s parameters, {name: (seeds, ...)}: kept as an agent entry, a method's theta_0."""
    return {name: parameter.detach().clone() for name, parameter in network.named_parameters()}


class SeedwiseAdam(optim.Optimizer):
    """Adam over seed-stacked parameters, each seed's step one-seed ``optim.Adam(fused=True)``'s, bit for bit."""

    def __init__(self, params, lr: float, betas: tuple = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        # weight_decay enters the state only when used: a checkpoint's optimizer entries stay the same without it
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, **({"weight_decay": weight_decay} if weight_decay
                                                                        else {})))
        self.params = self.param_groups[0]["params"]
        self.num_seeds = len(self.params[0])
        for p in self.params:
            self.state[p].update(step=torch.zeros(self.num_seeds, device=p.device), exp_avg=torch.zeros_like(p),
                                 exp_avg_sq=torch.zeros_like(p))
        self.lockstep = True  # all seeds have taken the same number of steps
        self._seed_views = None

    def seed_views(self) -> list:
        """Per seed: views of its parameters, moments and step counts (made once; gradients: seed_gradients)."""
        if self._seed_views is None:
            tensors = [self.params, [self.state[p]["exp_avg"] for p in self.params],
                       [self.state[p]["exp_avg_sq"] for p in self.params], [self.state[p]["step"] for p in self.params]]
            with torch.no_grad():
                self._seed_views = [[[t[k] for t in group] for group in tensors] for k in range(self.num_seeds)]
        return self._seed_views

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        steps = torch.stack([self.state[p]["step"] for p in self.params])
        self.lockstep = bool((steps == steps[:, :1]).all())
        self._seed_views = None

    def steps_taken(self) -> np.ndarray:
        """Each seed's Adam step count, (seeds,) int64 (skipped steps do not count; checkpointed)."""
        return torch.stack([self.state[p]["step"] for p in self.params]).amax(0).cpu().numpy().astype(np.int64)

    def seed_gradients(self, k: int) -> list:
        """Views of seed k's gradients (of the parameters that have one)."""
        return [p.grad[k] for p in self.params if p.grad is not None]

    @torch.no_grad()
    def gradient_norms(self) -> torch.Tensor:
        """Each seed's gradient norm over all of its parameters, as ``clip_grad_norm_`` computes it: (seeds,)."""
        if self.params[0].is_cuda:
            return torch.stack([p.grad.flatten(1).norm(dim=1) for p in self.params if p.grad is not None],
                               dim=1).norm(dim=1)
        return torch.stack([torch.linalg.vector_norm(torch.stack(torch._foreach_norm(self.seed_gradients(k))))
                            for k in range(self.num_seeds)])

    @torch.no_grad()
    def max_abs_gradients(self) -> torch.Tensor:
        """Each seed's largest absolute gradient entry (the paper's gradient diagnostic): (seeds,)."""
        return torch.cat([p.grad.flatten(1) for p in self.params if p.grad is not None], dim=1).abs().amax(dim=1)

    @torch.no_grad()
    def clip_grad_norms_(self, max_norm: float, norms: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``clip_grad_norm_`` per seed, by ``norms`` (seeds,) if given; returns the norms before clipping."""
        norms = self.gradient_norms() if norms is None else norms
        scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        if self.params[0].is_cuda:
            for p in self.params:
                if p.grad is not None:
                    p.grad.mul_(scale.view(-1, *[1] * (p.ndim - 1)))
        else:
            for k in range(self.num_seeds):
                torch._foreach_mul_(self.seed_gradients(k), scale[k])
        return norms

    @torch.no_grad()
    def step(self, stepping: Optional[np.ndarray] = None) -> None:
        group = self.param_groups[0]
        hyperparameters = dict(amsgrad=False, beta1=group["betas"][0], beta2=group["betas"][1], lr=group["lr"],
                               weight_decay=group.get("weight_decay", 0.0), eps=group["eps"], maximize=False)
        # as torch.optim.Adam, a parameter without a gradient is not stepped
        stepped = [i for i, p in enumerate(self.params) if p.grad is not None]
        if self.params[0].is_cuda and self.lockstep and stepping is None:
            params = [self.params[i] for i in stepped]
            states = [self.state[p] for p in params]
            adam_update(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                        [s["exp_avg_sq"] for s in states], [], [s["step"][0] for s in states], fused=True,
                        **hyperparameters)
            torch._foreach_add_([s["step"][1:] for s in states], 1.0)  # the kernel counted seed 0's step only
            return
        self.lockstep &= stepping is None or bool(stepping.all())
        for k in range(self.num_seeds) if stepping is None else np.flatnonzero(stepping):
            params, exp_avgs, exp_avg_sqs, steps = ([views[i] for i in stepped] for views in self.seed_views()[k])
            adam_update(params, self.seed_gradients(k), exp_avgs, exp_avg_sqs, [], steps, fused=True, **hyperparameters)


class RunningMeanStd:
    """Running mean and variance per seed, as gymnasium's wrappers: statistics (seeds, 1, *shape)."""

    def __init__(self, num_seeds: int, shape=(), epsilon: float = 1e-4):
        self.mean = np.zeros((num_seeds, 1, *shape), np.float64)
        self.var = np.ones((num_seeds, 1, *shape), np.float64)
        self.count = epsilon  # the same for every seed: all seeds see one sample per env and step

    def update(self, batch: np.ndarray) -> None:
        batch_count = batch.shape[1]
        total = self.count + batch_count
        if batch_count == 1:
            # one env per step: the formula below with the same roundings (x * 1, x + 0.0), at half the cost
            delta = batch - self.mean
            self.mean = self.mean + delta / total
            self.var = (self.var * self.count + delta**2 * self.count / total) / total
        else:
            batch_mean, batch_var = batch.mean(axis=1, keepdims=True), batch.var(axis=1, keepdims=True)
            delta = batch_mean - self.mean
            self.mean = self.mean + delta * batch_count / total
            self.var = (self.var * self.count + batch_var * batch_count
                        + delta**2 * self.count * batch_count / total) / total
        self.count = total

    def normalize(self, x: np.ndarray, clip: float) -> np.ndarray:
        """Observation normalization with the current statistics, clipped to +-clip (gymnasium's convention)."""
        normalized = ((x - self.mean) / np.sqrt(self.var + 1e-8)).astype(np.float32)
        return np.minimum(np.maximum(normalized, -clip), clip)  # np.clip's Python wrapper costs more than both

    def state_dict(self) -> dict:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var, self.count = state["mean"].copy(), state["var"].copy(), state["count"]


def map_leaves(fn, *trees):
    """``fn`` applied leaf by leaf to trees of one structure (dicts and lists nest, anything else is a leaf)."""
    if isinstance(trees[0], dict):
        return {key: map_leaves(fn, *(tree[key] for tree in trees)) for key in trees[0]}
    if isinstance(trees[0], list):
        return [map_leaves(fn, *(tree[i] for tree in trees)) for i in range(len(trees[0]))]
    return fn(*trees)


def seed_slice(state, seed_index: int):
    """Seed ``seed_index``'s part of a stacked state (its seed axis kept, of length 1); other leaves are shared."""
    k = slice(seed_index, seed_index + 1)
    return map_leaves(lambda x: (x[k].clone() if isinstance(x, torch.Tensor) else x[k].copy())
                      if has_seed_axis(x) else x, state)


def stack_seeds(states: list):
    """The inverse of ``seed_slice``: one stacked state from the per-seed states, in the given order."""
    return map_leaves(lambda *xs: (torch.cat(xs) if isinstance(xs[0], torch.Tensor) else np.concatenate(xs))
                      if has_seed_axis(xs[0]) else xs[0], *states)


def has_seed_axis(x) -> bool:
    """Whether a state's leaf has a seed axis (a tensor or an array of at least one dimension)."""
    return isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim > 0


# ---- The run state ----


Agent = SimpleNamespace  # what the method learns or keeps (make_agent); the checkpoint stores each entry by name


class Run:
    """Everything a run is; a checkpoint holds the agent, STATE, COUNTERS and each seed's env and generator states."""

    STATE = ("obs_rms", "raw_obs", "episode_return", "episode_length", "nonfinite_skips_total", "last_eval_return")
    COUNTERS = ("global_step", "iteration", "task_index", "timers")

    # The configuration (start_run: choose_seeds, set_up_devices)
    args: "Args"
    seeds: list  # the seeds this process trains (finished ones left out); k indexes them in every stacked array
    run_names: dict  # seed -> the run's name (W&B, the default run directory)
    run_dirs: dict  # seed -> its run directory
    config_args: dict  # seed -> the flags config.json records (with its own seed)
    schedule: list  # the setting's whole task schedule; num_tasks of it are run
    num_tasks: int
    total_steps: int  # per seed: steps_per_task * num_tasks
    batch_size: int  # per seed and update: num_steps * num_envs
    num_iterations: int
    device: torch.device
    generators: list  # one torch.Generator per seed: initial weights, action noise, minibatch permutations
    # The simulations (build): one batch for the training envs, one for the evaluation episodes
    env: nonstationary_envs.BatchedEnv
    eval_env: nonstationary_envs.BatchedEnv
    sims: np.ndarray  # (seeds, envs): seed k's training simulations
    action_low: np.ndarray
    action_high: np.ndarray
    # The learning state, per seed (build; STATE and the agent's entries are checkpointed)
    agent: "Agent"  # the method's (make_agent)
    obs_rms: "RunningMeanStd"
    raw_obs: np.ndarray  # (seeds, envs, obs_dim): the envs' current observations
    obs: np.ndarray  # the same, normalized
    episode_return: np.ndarray  # (seeds, envs)
    episode_length: np.ndarray  # (seeds, envs); both kept here, not in wrappers, so that they are checkpointed
    nonfinite_skips_total: np.ndarray  # (seeds,)
    last_eval_return: np.ndarray  # (seeds,): the progress bar's
    consecutive_nonfinite: np.ndarray  # (seeds,): the run stops at --max-nonfinite-skips
    saved_states: list  # per seed (--save-states): observations and their steps, written with each checkpoint
    saved_state_steps: list
    # The counters, shared by all seeds (COUNTERS)
    global_step: int  # per seed
    iteration: int
    task_index: int
    timers: dict  # seconds of wall, eval and plasticity time, over all sessions
    # The outputs (open_outputs)
    writers: list  # per seed: TensorBoard
    evaluations_logs: list  # per seed: evaluations.csv
    plasticity_logs: list  # per seed: plasticity.csv
    # This session (start_session)
    stop_signal: list  # SIGTERM (preemption) or SIGINT (Ctrl-C) received: checkpoint, exit 75 at the next update's end
    buffers: SimpleNamespace  # the rollout's arrays on the CPU, (seeds, T, envs, ...): one device copy per update
    seed_rows: torch.Tensor  # (seeds, 1): gathers each seed's own minibatch
    eval_points: list  # the evaluation steps still due
    next_checkpoint: float  # the step of the next periodic checkpoint
    session_start: tuple  # (global_step, timers) when this session started: the steps/s
    wall_mark: float  # when timers["wall"] was last brought up to date
    progress: "Progress"
    exit_code: int
    stats: "IterationStats"  # this iteration's (next_iteration)

    def next_iteration(self) -> bool:
        """Start the next iteration (fresh stats), or False when the run is done or has to stop."""
        if self.global_step >= self.total_steps or self.exit_code:
            return False
        self.iteration += 1
        self.stats = IterationStats(len(self.seeds), self.device)
        return True

    def checkpoint_state(self, k: int) -> dict:
        """Seed k's checkpoint, in the format of a one-seed run."""
        stacked = {name: value.state_dict() if hasattr(value, "state_dict") else value for name, value in
                   [*vars(self.agent).items(), *((name, getattr(self, name)) for name in self.STATE)]}
        return {"format": CHECKPOINT_FORMAT, "args": self.config_args[self.seeds[k]],
                **{name: copy.deepcopy(getattr(self, name)) for name in self.COUNTERS}, **seed_slice(stacked, k),
                "env_states": [self.env.get_state(sim) for sim in self.sims[k]],
                "rng": {"torch": self.generators[k].get_state()}}

    def load(self, checkpoints: list) -> None:
        """Restore the state of every seed from its checkpoint (all at the same step)."""
        state = stack_seeds([{key: value for key, value in checkpoint.items()
                              if key not in ("args", "rng", "env_states")}
                             for checkpoint in checkpoints])
        for name, value in [*vars(self.agent).items(), *((name, getattr(self, name)) for name in self.STATE)]:
            if hasattr(value, "load_state_dict"):
                value.load_state_dict(state[name])
            else:
                setattr(self.agent if name in vars(self.agent) else self, name, state[name].copy())
        for name in self.COUNTERS:
            setattr(self, name, state[name])
        for sims, checkpoint in zip(self.sims, checkpoints):
            for sim, env_state in zip(sims, checkpoint["env_states"]):
                self.env.set_state(sim, env_state)
        for generator, checkpoint in zip(self.generators, checkpoints):
            generator.set_state(checkpoint["rng"]["torch"])


class IterationStats:
    """One iteration's record per seed: what collect_rollout, optimizer_step and record count, log_update reads."""

    def __init__(self, num_seeds: int, device: torch.device):
        self.task_ended = False  # a task ended inside the rollout: checkpoint after the update
        self.minibatch_steps = np.zeros(num_seeds, np.int64)  # minibatch steps each seed took in this update
        self.skipped = np.zeros(num_seeds, np.int64)  # minibatch steps skipped for a non-finite loss or gradient
        self.skip_reasons = [set() for _ in range(num_seeds)]  # the names of the non-finite terms
        self.critic_max_grad = torch.zeros(num_seeds, device=device)  # the critic's largest gradient entry
        self.grad_norms = {}  # optimizer name -> (seeds,) gradient norms of the last minibatch step, before clipping
        self.stat_names, self.stat_sums = [], None  # the minibatch statistics, their sums (seeds, statistics)


class Progress:
    """tqdm's bar on a terminal; else a progress note on evaluation lines, and at least every PROGRESS_NOTE_SECONDS."""

    def __init__(self, total_steps: int, step: int):
        from tqdm import tqdm

        self.bar = tqdm(total=total_steps, initial=step, unit="step", dynamic_ncols=True, disable=None)
        self.to_file, self.total_steps, self.mark = not sys.stderr.isatty(), total_steps, (time.perf_counter(), step)

    def advance(self, step: int) -> None:
        self.bar.update(step - self.bar.n)

    def write(self, message: str, step: Optional[int] = None) -> None:
        """``message`` above the bar; with ``step``, and output to a file, the note appended."""
        self.bar.write(message + (f" | {self.note(step)}" if step is not None and self.to_file else ""))

    def note(self, step: int) -> str:
        now, (last_time, last_step) = time.perf_counter(), self.mark
        self.mark = (now, step)
        note = f"{step:,}/{self.total_steps:,} steps ({100 * step / self.total_steps:.1f}%)"
        if step > last_step:
            rate = (step - last_step) / max(now - last_time, 1e-9)
            seconds_left = round((self.total_steps - step) / rate)
            hours, minutes, seconds = seconds_left // 3600, seconds_left // 60 % 60, seconds_left % 60
            note += f", {rate:,.0f} steps/s, {hours}:{minutes:02d}:{seconds:02d} left"
        return note

    def end_iteration(self, step: int, **postfix) -> None:
        self.bar.set_postfix(**postfix, refresh=False)
        if self.to_file and time.perf_counter() - self.mark[0] >= PROGRESS_NOTE_SECONDS:  # evaluations far apart
            print(f"step {step}: {self.note(step)}", flush=True)


# ---- Environments and evaluation ----


def make_env(args: Args, num_sims: int) -> nonstationary_envs.BatchedEnv:
    """``num_sims`` simulations of the setting stepped together (mujoco.batch), on --env-threads threads."""
    threads = min(args.env_threads or len(os.sched_getaffinity(0)), num_sims)
    return nonstationary_envs.BatchedEnv(args.env_id, args.experiment, args.strategy, args.friction_mode,
                                         num_sims=num_sims, nthread=threads, max_episode_steps=args.max_episode_steps,
                                         include_cfrc_ext_in_observation=args.include_cfrc_ext_in_observation)


def network_input(obs_rms: RunningMeanStd, obs: np.ndarray, args: Args) -> np.ndarray:
    """What the networks see: raw observations as float32, or with --norm-obs normalized and clipped."""
    if args.norm_obs:
        return obs_rms.normalize(obs, args.normalization_clip)
    # the shape normalize gives (obs broadcast against the per-seed statistics, (seeds, 1, obs_dim))
    return np.broadcast_to(obs, np.broadcast_shapes(obs.shape, obs_rms.mean.shape)).astype(np.float32)


def evaluation_steps(steps_per_task: int, num_tasks: int, eval_frequency: int) -> list:
    """Global steps at which the paper evaluates: 0, every eval_frequency steps, and the last step of every task."""
    task_ends = (steps_per_task * (task + 1) for task in range(num_tasks))
    return sorted({0, *range(eval_frequency, steps_per_task * num_tasks + 1, eval_frequency), *task_ends})


def fewest_evaluations_per_task(steps_per_task: int, num_tasks: int, eval_frequency: int) -> int:
    """The fewest evaluations any task gets after its first step (its curve's points; step 0 aside)."""
    points = evaluation_steps(steps_per_task, num_tasks, eval_frequency)[1:]
    return int(np.bincount([evaluated_task(step, steps_per_task) for step in points], minlength=num_tasks).min())


def evaluated_task(global_step: int, steps_per_task: int) -> int:
    """The task an evaluation at ``global_step`` measures: the task of the step that was just taken."""
    return max(global_step - 1, 0) // steps_per_task


def evaluate_policy(policy, eval_env: nonstationary_envs.BatchedEnv, task: int, obs_rms: RunningMeanStd,
                    args: Args, seeds: list, device, max_states: int = 0):
    """One episode per eval simulation of ``policy`` on ``task``: returns, lengths, visited states per seed."""
    num_seeds, num_episodes = len(seeds), eval_env.num_sims // len(seeds)
    eval_env.set_task(None, task)
    obs = eval_env.reset(None, [seed + 100 + i for seed in seeds for i in range(num_episodes)])
    obs = obs.reshape(num_seeds, num_episodes, -1)
    low, high = eval_env.single_action_space.low, eval_env.single_action_space.high
    returns, lengths = np.zeros((num_seeds, num_episodes)), np.zeros((num_seeds, num_episodes), dtype=np.int64)
    running = np.ones((num_seeds, num_episodes), dtype=bool)
    visited = [[] for _ in range(num_seeds)]
    stride = max(1, math.ceil(num_episodes * args.max_episode_steps / max(max_states, 1)))
    with torch.inference_mode():
        for t in range(args.max_episode_steps):
            if not running.any():
                break
            obs_norm = network_input(obs_rms, obs, args)  # frozen statistics: network_input does not update them
            if max_states and t % stride == 0:
                for k in range(num_seeds):
                    visited[k].append(obs_norm[k][running[k]])
            actions = np.clip(policy(torch.from_numpy(obs_norm).to(device)).cpu().numpy(), low, high)
            ids = np.flatnonzero(running)  # only the episodes still running step (flat views of (seeds, episodes))
            next_obs, reward, terminated, truncated = eval_env.step(actions.reshape(eval_env.num_sims, -1)[ids],
                                                                    None if ids.size == eval_env.num_sims else ids)
            obs.reshape(eval_env.num_sims, -1)[ids] = next_obs
            returns.reshape(-1)[ids] += reward
            lengths.reshape(-1)[ids] += 1
            running.reshape(-1)[ids] = ~(terminated | truncated)
    states = [np.concatenate(v)[:max_states] if v else np.zeros((0, obs.shape[-1]), np.float32) for v in visited]
    return returns, lengths, states


def evaluate(run: Run, step: int) -> None:
    """The paper's protocol at ``step``, logged per seed; at step 0 and every task end the plasticity metrics too."""
    args, seeds, eval_start = run.args, run.seeds, time.perf_counter()
    task = evaluated_task(step, args.steps_per_task)
    measure_plasticity = step == 0 or step % args.steps_per_task == 0
    returns, lengths, visited = evaluate_policy(lambda obs: evaluation_action(run.agent, obs), run.eval_env, task,
                                                run.obs_rms, args, seeds, run.device,
                                                args.plasticity_states if measure_plasticity else 0)
    for k in range(len(seeds)):
        run.evaluations_logs[k].write([step, task, returns.shape[1], returns[k].mean(), returns[k].std(),
                                       returns[k].min(), returns[k].max()])
        run.writers[k].add_scalar("eval/episodic_return", returns[k].mean(), step)
        run.writers[k].add_scalar("eval/episodic_length", lengths[k].mean(), step)
    run.timers["eval"] += time.perf_counter() - eval_start
    run.last_eval_return[:] = returns.mean(axis=1)
    run.progress.write(f"eval step={step} task={task} " + (
        f"return={returns.mean():.1f} +- {returns.std():.1f}" if len(seeds) == 1 else "return per seed: "
        + ", ".join(f"{seed}: {value:.0f}" for seed, value in zip(seeds, run.last_eval_return))), step)
    if measure_plasticity:
        log_plasticity(run, step, task, visited)


def log_plasticity(run: Run, step: int, task: int, visited: list) -> None:
    """Effective and stable rank and dormant units of the critic and the actor, each seed on its own states."""
    plasticity_start = time.perf_counter()
    with torch.inference_mode():
        for network_name, network in (("critic", run.agent.critic), ("actor", run.agent.actor)):
            for k in range(len(run.seeds)):
                states = torch.from_numpy(visited[k]).to(run.device)[None]  # (1, states, obs_dim): a one-seed batch
                activations = [layer[0] for layer in single_seed_network(network, k).hidden_activations(states)]
                metrics = {"effective_rank": plasticity_metrics.effective_rank(activations[-1]),
                           "stable_rank": plasticity_metrics.stable_rank(activations[-1]),
                           "dormant_percent": plasticity_metrics.dormant_unit_percentage(activations)}
                for key, value in metrics.items():
                    run.writers[k].add_scalar(f"plasticity/{network_name}_{key}", value, step)
                run.plasticity_logs[k].write([step, task, network_name, *metrics.values()])
    run.timers["plasticity"] += time.perf_counter() - plasticity_start


# ---- The rollout ----


def time_major(x: torch.Tensor) -> torch.Tensor:
    """(seeds, T, ...) <-> (T, seeds, ...): a view, for recursions that run over time."""
    return x.transpose(0, 1)


def flat(x: torch.Tensor) -> torch.Tensor:
    """(seeds, T, envs) -> (seeds, T * envs): a rollout tensor as the batch's samples."""
    return x.reshape(x.shape[0], -1)


def collect_rollout(run: Run) -> Optional[SimpleNamespace]:
    """num_steps steps of every env, changing tasks and evaluating on the way; None when the run ended inside."""
    args, env, writers, buffers = run.args, run.env, run.writers, run.buffers
    num_seeds, device, progress, stats = len(run.seeds), run.device, run.progress, run.stats
    act = rollout_policy(run.agent, args, run.generators, device)
    with torch.inference_mode():  # once per rollout: entering it costs ~20 us
        for step in range(args.num_steps):
            step_task = run.global_step // args.steps_per_task
            if step_task != run.task_index:
                run.task_index = step_task
                env.set_task(None, run.task_index)
                for writer in writers:
                    writer.add_scalar("task/index", run.task_index, run.global_step)
                progress.write(f"step {run.global_step}: task {step_task} ({env.task_description(step_task)})")
            buffers.obs[:, step] = run.obs
            action = act(torch.from_numpy(run.obs).to(device), step).cpu().numpy()
            buffers.actions[:, step] = action
            clipped_action = np.minimum(np.maximum(action, run.action_low), run.action_high)  # np.clip costs ~10 us
            run.global_step += args.num_envs
            next_raw_obs, reward, terminated, truncated = env.step(clipped_action.reshape(env.num_sims, -1))
            reward, terminated = reward.reshape(run.raw_obs.shape[:2]), terminated.reshape(run.raw_obs.shape[:2])
            run.episode_return += reward
            run.episode_length += 1
            buffers.raw_rewards[:, step] = reward
            buffers.rewards[:, step] = training_reward(run.agent, reward, terminated, args)
            buffers.terminations[:, step] = terminated
            done = terminated | truncated.reshape(terminated.shape)  # the env's episode clock (--max-episode-steps)
            buffers.dones[:, step] = done
            run.raw_obs = next_raw_obs.reshape(run.raw_obs.shape)
            # An ended episode restarts in the same step; its final observation is next_obs (for the bootstrap)
            ended, final_raw_obs = (np.argwhere(done), run.raw_obs[done]) if done.any() else ((), ())
            if len(ended):
                for k, i in ended:
                    writers[k].add_scalar("charts/episodic_return", run.episode_return[k, i], run.global_step)
                    writers[k].add_scalar("charts/episodic_length", run.episode_length[k, i], run.global_step)
                run.episode_return[done], run.episode_length[done] = 0.0, 0
                run.raw_obs[done] = env.reset(np.flatnonzero(done))
            run.obs_rms.update(run.raw_obs)
            run.obs = network_input(run.obs_rms, run.raw_obs, args)
            buffers.next_obs[:, step] = run.obs
            for (k, i), final in zip(ended, final_raw_obs):
                buffers.next_obs[k, step, i] = network_input(run.obs_rms, final, args)[k, 0]
            if args.save_states and (run.global_step // args.num_envs) % args.save_states_every == 0:
                for k in range(num_seeds):
                    run.saved_states[k].append(run.raw_obs[k].astype(np.float16))
                    run.saved_state_steps[k].append(np.full(args.num_envs, run.global_step))
            if run.eval_points and run.global_step >= run.eval_points[0]:
                progress.advance(run.global_step)
                stats.task_ended |= run.global_step % args.steps_per_task == 0
                evaluate(run, run.eval_points.pop(0))
            if run.global_step >= run.total_steps:
                break
    progress.advance(run.global_step)
    if run.global_step >= run.total_steps:  # the rollout ended early, or its update would not be evaluated
        return None
    rollout = {name: torch.from_numpy(array).to(device) for name, array in vars(buffers).items()}
    for name in ("obs", "next_obs", "actions"):  # as samples, (seeds, T * envs, dim); the others stay (seeds, T, envs)
        rollout[name] = rollout[name].reshape(num_seeds, run.batch_size, -1)
    return SimpleNamespace(**rollout, shape=(num_seeds, args.num_steps, args.num_envs))


# ---- The update: each seed's own minibatches and optimizer steps, guarded against non-finite values ----


class Minibatch(dict):
    """Each seed's own minibatch: ``mb[key]`` is ``batch[key][k, index[k]]`` for every seed k, gathered lazily."""

    def __init__(self, batch: dict, index: torch.Tensor, seed_rows: torch.Tensor):
        super().__init__()
        self.batch, self.index, self.seed_rows = batch, index, seed_rows

    def __missing__(self, key: str) -> torch.Tensor:
        value = self[key] = self.batch[key][self.seed_rows, self.index]
        return value


def minibatches(run: Run, batch: dict):
    """One epoch of each seed's own random minibatches (or in order); none once the run must stop (non-finite)."""
    if must_stop_nonfinite(run):
        return
    # --no-shuffle-minibatches: the batch in its (time) order every epoch, nothing drawn from the seeds' generators
    permutation = torch.stack([torch.randperm(run.batch_size, generator=generator) if run.args.shuffle_minibatches
                               else torch.arange(run.batch_size) for generator in run.generators]).to(run.device)
    for start in range(0, run.batch_size, run.args.minibatch_size):
        if must_stop_nonfinite(run):
            return
        yield Minibatch(batch, permutation[:, start : start + run.args.minibatch_size], run.seed_rows)


def must_stop_nonfinite(run: Run) -> bool:
    """Whether a seed has skipped --max-nonfinite-skips minibatch steps in a row (end_iteration stops the run)."""
    return run.consecutive_nonfinite.max() >= run.args.max_nonfinite_skips


def optimizer_step(run: Run, losses: dict, unclipped: tuple = ()) -> np.ndarray:
    """One clipped step of each ``agent.{name}_optimizer`` on ``losses[name]``; returns which seeds stepped."""
    optimizers = {name: getattr(run.agent, f"{name}_optimizer") for name in losses}
    for optimizer in optimizers.values():
        optimizer.zero_grad()
    sum(losses.values()).sum().backward()
    critic_grad_max = run.agent.critic_optimizer.max_abs_gradients()
    joint_norms = None
    if run.args.joint_optimizer:  # one clip over every clipped optimizer's gradients, as one Adam
        joint_norms = torch.linalg.vector_norm(torch.stack([optimizer.gradient_norms() for name, optimizer in
                                                            optimizers.items() if name not in unclipped]), dim=0)
    stats = run.stats
    stats.grad_norms = {name: optimizer.gradient_norms() if name in unclipped
                        else optimizer.clip_grad_norms_(run.args.max_grad_norm, joint_norms)
                        for name, optimizer in optimizers.items()}
    # One host sync per minibatch: a seed whose loss or gradient is not finite skips its step
    checks = {**{f"{name}_loss": loss for name, loss in losses.items()},
              **{f"{name}_grad": norm for name, norm in stats.grad_norms.items()}}
    finite = torch.stack(list(checks.values())).isfinite().cpu().numpy()
    stepped = finite.all(axis=0)
    for k in np.flatnonzero(~stepped):
        stats.skip_reasons[k].update(np.array(list(checks))[~finite[:, k]])
    stats.skipped += ~stepped
    run.consecutive_nonfinite = np.where(stepped, 0, run.consecutive_nonfinite + 1)
    if must_stop_nonfinite(run):  # no seed steps: the run stops with the last finite state
        return np.zeros_like(stepped)
    for optimizer in optimizers.values():
        optimizer.step(None if stepped.all() else stepped)  # None: every seed steps (SeedwiseAdam's fused path)
    stats.minibatch_steps += stepped
    stats.critic_max_grad = torch.where(torch.from_numpy(stepped).to(run.device),
                                        torch.maximum(stats.critic_max_grad, critic_grad_max), stats.critic_max_grad)
    return stepped


def record(run: Run, stats: dict, stepped: np.ndarray) -> None:
    """Add a minibatch's statistics, {name: (seeds,)}, to the update's sums of the seeds that stepped (on device)."""
    values, sums = torch.stack(list(stats.values()), dim=1).detach(), run.stats
    if sums.stat_sums is None:
        sums.stat_names, sums.stat_sums = list(stats), torch.zeros_like(values)
    sums.stat_sums += torch.where(torch.from_numpy(stepped).to(run.device)[:, None], values, 0.0)


def update_means(run: Run) -> dict:
    """{name: [each seed's mean over the minibatch steps it took in this update]}, in one host sync."""
    stats = run.stats
    if stats.stat_sums is None:
        return {}
    steps_taken = torch.from_numpy(np.maximum(stats.minibatch_steps, 1)).to(run.device)
    return dict(zip(stats.stat_names, (stats.stat_sums / steps_taken[:, None]).T.tolist()))


def updated_seeds(run: Run):
    """(k, log) for every seed k that stepped in this update; ``log(tag, value)`` adds a point to its TensorBoard."""
    for k, writer in enumerate(run.writers):
        if run.stats.minibatch_steps[k]:
            yield k, lambda tag, value, writer=writer: writer.add_scalar(tag, value, run.global_step)


def end_iteration(run: Run) -> None:
    """The shared logs of an update, then a checkpoint when due, or the stop (signal, non-finite steps)."""
    args, seeds, stats = run.args, run.seeds, run.stats
    now = time.perf_counter()
    run.timers["wall"] += now - run.wall_mark
    run.wall_mark = now
    start_step, start = run.session_start  # this session's steps/s, evaluations left out
    session = {key: run.timers[key] - start[key] for key in run.timers}
    group_sps = len(seeds) * (run.global_step - start_step) / max(session["wall"] - session["eval"]
                                                                  - session["plasticity"], 1e-9)
    critic_max_grads = stats.critic_max_grad.tolist()
    for k, writer in enumerate(run.writers):
        if stats.skipped[k]:
            run.nonfinite_skips_total[k] += stats.skipped[k]
            warnings.warn(f"seed {seeds[k]}, step {run.global_step}: skipped {stats.skipped[k]} minibatch "
                          f"step(s) with non-finite {', '.join(sorted(stats.skip_reasons[k]))}")
        writer.add_scalar("charts/nonfinite_skips", run.nonfinite_skips_total[k], run.global_step)
        if stats.minibatch_steps[k]:
            writer.add_scalar("plasticity/critic_max_abs_grad", critic_max_grads[k], run.global_step)
        writer.add_scalar("charts/SPS", group_sps / len(seeds), run.global_step)  # this seed's own steps/s
    run.progress.end_iteration(run.global_step, task=run.task_index, sps=f"{group_sps:.0f}",
                               eval=f"{np.nanmean(run.last_eval_return):.0f}")
    # a signal that arrives while a checkpoint is written stops the run after the next update, with its own checkpoint
    run.exit_code = EXIT_NONFINITE if must_stop_nonfinite(run) else EXIT_PREEMPTED if run.stop_signal else 0
    if run.exit_code or stats.task_ended or run.global_step >= run.next_checkpoint:
        write_checkpoint(run)
        while run.next_checkpoint <= run.global_step:
            run.next_checkpoint += args.checkpoint_frequency
    if run.exit_code == EXIT_NONFINITE:
        failed = [seeds[k] for k in np.flatnonzero(run.consecutive_nonfinite >= args.max_nonfinite_skips)]
        reasons = sorted(set().union(*(stats.skip_reasons[seeds.index(seed)] for seed in failed)))
        print(f"error: seed {', '.join(map(str, failed))}: {args.max_nonfinite_skips} consecutive minibatch steps "
              f"had a non-finite loss or gradient ({', '.join(reasons)}) at step {run.global_step}; stopped with a "
              "checkpoint of the last finite state. Lower the learning rate or inspect the run before resuming.",
              file=sys.stderr)
    elif run.exit_code == EXIT_PREEMPTED:
        run.progress.write(f"received signal {run.stop_signal[0]}: checkpoint written at step {run.global_step}; "
                           f"re-run the same command to resume (exit code {EXIT_PREEMPTED})")


# ---- Checkpoints and outputs ----


# A write that failed for want of room or of a working disk: a full disk, a quota, a file too large, an I/O error
FAILED_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def failed_write(error: BaseException) -> Optional[OSError]:
    """The OSError of a failed write, ``error`` itself or in a RuntimeError's chain (docs/long-runs.md), else None."""
    if isinstance(error, OSError):
        return error
    cause, seen = (error.__cause__ or error.__context__ if isinstance(error, RuntimeError) else None), set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError) and cause.errno in FAILED_WRITE_ERRNOS:
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


class RunConfigError(Exception):
    """A configuration or run directory that the run refuses, raised where it is found: one line, exit 2 (run_main)."""


class RunWriteError(Exception):
    """A file of the run, ``path``, that could not be written (the failed write is its cause): exit 74 (run_main)."""

    path = property(lambda self: self.args[0])


@contextlib.contextmanager
def writing(path: str):
    """A write of ``path`` inside this context that fails (failed_write) raises RunWriteError(path)."""
    try:
        yield
    except (OSError, RuntimeError) as error:
        if failed_write(error) is None:
            raise
        raise RunWriteError(path) from error


def atomic_write_bytes(path: str, write_fn, previous: Optional[str] = None) -> None:
    """Write ``path`` via a temporary file (removed on failure), fsync and rename; the file replaced: ``previous``."""
    tmp_path = f"{path}.tmp"
    with writing(path):
        try:
            with open(tmp_path, "wb") as f:
                write_fn(f)
                f.flush()
                os.fsync(f.fileno())
            if previous and os.path.exists(path):
                os.replace(path, previous)
            os.replace(tmp_path, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp_path)
            raise


def quiet_failed_writes_in_writer_threads() -> None:
    """No traceback of TensorBoard's writer thread for a failed write (run_main reports it)."""
    if getattr(threading.excepthook, "quiet_failed_writes", False):
        return
    report = threading.excepthook
    threading.excepthook = lambda hook_args: None if type(hook_args.thread).__module__.startswith(
        "tensorboard.") and failed_write(hook_args.exc_value) is not None else report(hook_args)
    threading.excepthook.quiet_failed_writes = True


def arrays_as_tensors(state, places: list, path: tuple = ()):
    """``state`` with its numpy arrays as tensors of the same bits, their paths appended to ``places``."""
    if isinstance(state, dict):
        return {key: arrays_as_tensors(value, places, (*path, key)) for key, value in state.items()}
    if isinstance(state, list):
        return [arrays_as_tensors(value, places, (*path, i)) for i, value in enumerate(state)]
    if isinstance(state, np.ndarray):
        places.append(list(path))
        return torch.from_numpy(state.copy())
    return state


def save_checkpoint(run_dir: str, state: dict) -> None:
    """Write checkpoint.pt whole, the previous one kept as checkpoint.prev.pt."""
    places = []
    saved = {**arrays_as_tensors(state, places), "numpy_arrays": places}
    atomic_write_bytes(os.path.join(run_dir, "checkpoint.pt"), lambda f: torch.save(saved, f),
                       previous=os.path.join(run_dir, "checkpoint.prev.pt"))


def read_checkpoint(path: str) -> tuple:
    """(state, None) for a checkpoint this script can resume from, else (None, why not); it runs no code."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # what weights_only refuses: a global it would have to import and call
        return None, f"it needs code to load (older than format {CHECKPOINT_FORMAT}, or crafted); nothing in it ran"
    except Exception as error:  # a truncated or corrupt file
        return None, f"it is unreadable ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        return None, f"it has checkpoint format {found}, this script reads {CHECKPOINT_FORMAT}"
    for *parents, last in state.pop("numpy_arrays", []):  # back to the arrays save_checkpoint stored as tensors
        container = functools.reduce(lambda node, key: node[key], parents, state)
        container[last] = container[last].numpy()
    return state, None


def write_checkpoint(run: Run) -> None:
    """Each seed's checkpoint, after its TensorBoard points and states.npz."""
    for k, seed in enumerate(run.seeds):
        with writing(os.path.join(run.run_dirs[seed], "events.out.tfevents.*")):
            run.writers[k].flush()
        if run.args.save_states and run.saved_states[k]:
            observations, steps = np.concatenate(run.saved_states[k]), np.concatenate(run.saved_state_steps[k])
            run.saved_states[k], run.saved_state_steps[k] = [observations], [steps]
            atomic_write_bytes(os.path.join(run.run_dirs[seed], "states.npz"),
                               lambda f: np.savez_compressed(f, observations=observations, global_steps=steps))
        save_checkpoint(run.run_dirs[seed], run.checkpoint_state(k))


def csv_lines_to_keep(path: str, header: list, last_step: int) -> Optional[list]:
    """The lines of a CSV log a resume from ``last_step`` keeps (None: no file); RunConfigError for a bad row."""
    if not os.path.exists(path):
        return None
    remedy = (f"the run directory is unchanged; repair the file to resume (rows of steps after {last_step}, the "
              "checkpoint's, may simply be deleted: the run logs them again)")
    with open(path, "rb") as f:
        lines = [line + b"\n" for line in f.read().split(b"\n")[:-1]]  # the last piece is empty, or a torn line
    if not lines or lines[0].decode("ascii", "replace").rstrip("\r\n").split(",") != header:
        raise RunConfigError(f"{path}, line 1: not the header {','.join(header)!r}; {remedy}")
    kept = lines[:1]
    for number, line in enumerate(lines[1:], start=2):
        step = line.split(b",", 1)[0]
        if step.isdigit() and int(step) > last_step:
            continue
        if not step.isdigit() or line.count(b",") != len(header) - 1:
            raise RunConfigError(f"{path}, line {number}: {line.decode('ascii', 'replace').strip()!r} is not a row "
                                 f"of {len(header)} fields, a step number first; {remedy}")
        kept.append(line)
    return kept


class CsvLog:
    """Append-only CSV with a header; a row is written whole at once, and a failed write cut back (no torn row)."""

    def __init__(self, path: str, header: list):
        self.path = path
        with writing(path):
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        if os.fstat(self.fd).st_size == 0:
            self.write(header)

    def write(self, row: list) -> None:
        line = io.StringIO()
        csv.writer(line).writerow(row)
        data, size = line.getvalue().encode(), os.fstat(self.fd).st_size
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, size)  # no torn row (a shorter file needs no space)
            raise RunWriteError(self.path) from error


def run_metadata() -> dict:
    """The release (RELEASE), git commit and package versions for config.json."""
    import mujoco

    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
                                capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"release": RELEASE, "git_commit": commit, "python": sys.version.split()[0], "torch": torch.__version__,
            "gymnasium": gym.__version__, "mujoco": mujoco.__version__, "numpy": np.__version__}


RUN_DIR_LOCKS = {}  # run directory -> its open .lock file, flocked for the process's life (prepare_run_dir)


def read_record(path: str, key: str, remedy: str) -> Optional[dict]:
    """A run directory's config.json or summary.json (None: no file); RunConfigError when it is unreadable."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            record = json.load(f)
        if not isinstance(record, dict) or key not in record:
            raise ValueError(f"it holds no {key}")
    except (OSError, ValueError) as error:  # ValueError: JSON's and UTF-8's errors too
        raise RunConfigError(f"{path} cannot be read: {str(error).splitlines()[0]}; the run directory is unchanged; "
                             f"{remedy}") from None
    return record


def prepare_run_dir(args: Args, run_dir: str, config_args: dict) -> None:
    """Create and lock the run directory; refuse another configuration's run, or delete it with --overwrite."""
    try:
        os.makedirs(run_dir, exist_ok=True)
        # locked before anything is read or deleted: --overwrite never touches a directory in use
        if (key := os.path.realpath(run_dir)) not in RUN_DIR_LOCKS:  # else this process holds it already
            lock = open(os.path.join(run_dir, ".lock"), "a+")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.seek(0)
                holder = lock.read().strip() or "another process"
                lock.close()
                raise RunConfigError(f"--run-dir {run_dir} is in use by {holder}: a run directory has one writer at "
                                     "a time (wait for that run to end, or stop it)") from None
            lock.truncate(0)  # opened to append: the line is written at the start
            print(f"PID {os.getpid()} on host {socket.gethostname()}", file=lock, flush=True)
            RUN_DIR_LOCKS[key] = lock
    except OSError as error:
        raise RunConfigError(f"--run-dir {run_dir} is not writable: {error}") from None
    try:  # no config.json: a new run directory, compared with itself
        previous = (read_record(os.path.join(run_dir, "config.json"), "args", "repair the file, or pass --overwrite "
                                "to delete this run's outputs and start again") or {"args": config_args})["args"]
    except RunConfigError:
        if not args.overwrite:
            raise
        previous = {}  # unreadable: its outputs are deleted below, as those of another configuration
    differing = sorted(k for k in set(previous) | set(config_args)
                       if k not in RESUME_IGNORED_ARGS and previous.get(k) != config_args.get(k))
    if differing and not args.overwrite:
        detail = ", ".join(f"{k}: {previous.get(k)!r} -> {config_args.get(k)!r}" for k in differing)
        raise RunConfigError(f"--run-dir {run_dir} holds a run with a different configuration ({detail}); "
                             "use another --run-dir or pass --overwrite to delete its outputs")
    if differing:
        remove_files(run_dir, RUN_FILES)


def remove_files(run_dir: str, names: tuple) -> None:
    """Delete the files ``names`` and the TensorBoard event files of ``run_dir``."""
    for name in os.listdir(run_dir):
        if name in names or name.startswith("events.out.tfevents"):
            os.remove(os.path.join(run_dir, name))


# ---- Starting and finishing a run ----


def start_run(args: Args, argv: list, notes: tuple = ()) -> Run:
    """Everything before the first iteration, in named steps; ``notes``: the method's lines in the header."""
    run = Run()
    run.args, run.exit_code = args, 0
    choose_seeds(run)
    set_up_devices(run, argv)
    build(run)
    resumed = restore_or_reset(run)
    open_outputs(run, resumed)
    print_header(run, notes, resumed)
    start_session(run, resumed)
    return run


def choose_seeds(run: Run) -> None:
    """The seeds still to train (a finished one is skipped; exit 0 when none is left), their run directories."""
    args = run.args
    all_seeds = [args.seed + k for k in range(args.num_seeds)]
    run.run_names = {seed: f"{args.env_id}__{args.experiment}__{args.strategy}__{run_tag(args)}__{seed}"
                     for seed in all_seeds}
    run.run_dirs = {seed: (args.run_dir or os.path.join("runs", run.run_names[seed])).replace("{seed}", str(seed))
                    for seed in all_seeds}
    run.config_args = {seed: {**dataclasses.asdict(args), "seed": seed} for seed in all_seeds}
    run.seeds = []
    for seed in all_seeds:
        prepare_run_dir(args, run.run_dirs[seed], run.config_args[seed])
    remedy = "a run writes it when it has finished: delete it to finish the run from its last checkpoint"
    for seed in all_seeds:
        if read_record(os.path.join(run.run_dirs[seed], "summary.json"), "status", remedy):
            print(f"{run.run_dirs[seed]} already holds a finished run (summary.json); nothing to do.")
        else:
            run.seeds.append(seed)
    if not run.seeds:
        sys.exit(0)
    run.schedule = nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy)
    run.num_tasks = args.num_tasks or len(run.schedule)
    run.total_steps = args.steps_per_task * run.num_tasks
    run.batch_size = args.num_steps * args.num_envs
    run.num_iterations = math.ceil(run.total_steps / run.batch_size)


def set_up_devices(run: Run, argv: list) -> None:
    """torch's threads and determinism, the device, and one generator per seed."""
    args = run.args
    torch.set_num_threads(args.torch_threads)
    if args.torch_deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
    use_cuda = args.cuda and torch.cuda.is_available() and ("--cuda" in argv or len(run.seeds) >= CUDA_MIN_SEEDS)
    # with its index, as config.json records it ("cuda:0")
    run.device = torch.device("cuda", torch.cuda.current_device()) if use_cuda else torch.device("cpu")
    run.generators = [torch.Generator().manual_seed(seed) for seed in run.seeds]


def build(run: Run) -> None:
    """The simulations, the method's agent, and the run's per-seed state and counters at their initial values."""
    args, num_seeds = run.args, len(run.seeds)
    # Simulations: seed k's training env i is simulation k * num_envs + i, reset first with seed + i; its evaluation
    # episode i is simulation k * eval_episodes + i of a second batch, reset with seed + 100 + i (paper, Appendix B)
    run.env = make_env(args, num_seeds * args.num_envs)
    run.eval_env = make_env(args, num_seeds * args.eval_episodes)
    run.sims = np.arange(run.env.num_sims).reshape(num_seeds, args.num_envs)
    run.action_low, run.action_high = run.env.single_action_space.low, run.env.single_action_space.high

    run.agent = make_agent(args, run.env.observation_dim, run.env.action_dim, run.generators, run.device)
    run.obs_rms = RunningMeanStd(num_seeds, (run.env.observation_dim,))
    run.raw_obs = None  # the envs' observations: fresh_start or resume
    run.episode_return = np.zeros((num_seeds, args.num_envs))
    run.episode_length = np.zeros((num_seeds, args.num_envs), dtype=np.int64)
    run.global_step, run.iteration, run.task_index = 0, 0, 0
    run.nonfinite_skips_total, run.consecutive_nonfinite = np.zeros(num_seeds, np.int64), np.zeros(num_seeds, np.int64)
    run.last_eval_return = np.full(num_seeds, np.nan)  # the progress bar's: each seed's last evaluation
    run.timers = {"wall": 0.0, "eval": 0.0, "plasticity": 0.0}  # seconds, accumulated over resumed sessions
    run.saved_states, run.saved_state_steps = [[] for _ in run.seeds], [[] for _ in run.seeds]


def restore_or_reset(run: Run) -> bool:
    """Resume every seed from its checkpoint at the newest step all hold, else start fresh; True when it resumed."""
    by_step, unusable = [], []  # each seed's readable checkpoints by step; (path, why not) of a seed that has none
    for seed in run.seeds:
        paths = [os.path.join(run.run_dirs[seed], name) for name in ("checkpoint.pt", "checkpoint.prev.pt")]
        read = [(path, *read_checkpoint(path)) for path in paths if os.path.exists(path)]
        states = {state["global_step"]: state for _, state, _ in read if state is not None}
        problems = [(path, problem) for path, state, problem in read if state is None]
        for path, problem in problems if states else ():
            warnings.warn(f"{path}: {problem}; trying the previous checkpoint")
        unusable += [] if states else problems
        by_step.append(states)
    if unusable and not run.args.overwrite:  # never discard what such a run logged, nor run what a file carries
        path, problem = unusable[0]
        raise RunConfigError(f"{path} cannot be resumed: {problem}"
                             f"{f' (and {len(unusable) - 1} more checkpoint files)' if len(unusable) > 1 else ''}; the "
                             "run directory is unchanged; pass --overwrite to start the run again")
    common = set.intersection(*(set(steps) for steps in by_step))
    if common:
        resume(run, [states[max(common)] for states in by_step])
    else:
        fresh_start(run)
    run.env.set_task(None, run.task_index)
    return bool(common)


def fresh_start(run: Run) -> None:
    """Step 0: the logs of an earlier attempt that wrote no checkpoint deleted, the simulations reset."""
    for seed in run.seeds:
        remove_files(run.run_dirs[seed], LOGGED_FILES)
    run.raw_obs = run.env.reset(None, [seed + i for seed in run.seeds for i in range(run.args.num_envs)]).reshape(
        len(run.seeds), run.args.num_envs, -1)
    run.obs_rms.update(run.raw_obs)


def resume(run: Run, checkpoints: list) -> None:
    """Every seed's state from its checkpoint, its logs cut back to that step (all read before any is written)."""
    run.load(checkpoints)
    kept_lines, step = {}, run.global_step
    for k, seed in enumerate(run.seeds):
        for name, header in CSV_LOGS.items():
            path = os.path.join(run.run_dirs[seed], name)
            kept_lines[path] = csv_lines_to_keep(path, header, step)
        states_path = os.path.join(run.run_dirs[seed], "states.npz")
        if run.args.save_states and os.path.exists(states_path):
            try:
                with np.load(states_path) as saved:
                    keep = saved["global_steps"] <= step
                    run.saved_states[k], run.saved_state_steps[k] = [saved["observations"][keep]], [
                        saved["global_steps"][keep]]
            except Exception as error:  # a truncated or corrupt archive: zipfile's, numpy's and KeyError
                raise RunConfigError(f"{states_path} cannot be read ({type(error).__name__}: {error}); the run "
                                     "directory is unchanged; delete the file to resume without the states saved so "
                                     "far") from None
    for path, lines in kept_lines.items():  # the file of a run that never stopped, byte for byte
        if lines is not None and len(kept := b"".join(lines)) != os.path.getsize(path):
            atomic_write_bytes(path, lambda f, kept=kept: f.write(kept))


def open_outputs(run: Run, resumed: bool) -> None:
    """Each seed's config.json, W&B (--track), TensorBoard writer, evaluations.csv and plasticity.csv."""
    from torch.utils.tensorboard import SummaryWriter

    args, seeds = run.args, run.seeds
    for seed in seeds:
        config = {"args": run.config_args[seed], "script": os.path.basename(__file__), "method": method_name(args),
                  "run_name": run.run_names[seed], "num_tasks": run.num_tasks, "total_steps": run.total_steps,
                  "schedule": [str(p) for p in run.schedule[: run.num_tasks]], "device": str(run.device),
                  **run_metadata()}
        atomic_write_bytes(os.path.join(run.run_dirs[seed], "config.json"),
                           lambda f: f.write(json.dumps(config, indent=2).encode()))
    if args.track:  # one seed (validate_args); before the SummaryWriters, which wandb's TensorBoard sync patches
        import wandb

        run_dir = run.run_dirs[seeds[0]]
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, sync_tensorboard=True, dir=run_dir,
                   config=run.config_args[seeds[0]], name=run.run_names[seeds[0]], id=wandb_run_id(run_dir),
                   resume="allow", group=f"{args.experiment}/{args.env_id}/{args.strategy}", job_type=method_name(args))
    run.writers = []
    quiet_failed_writes_in_writer_threads()
    for seed in seeds:
        with writing(os.path.join(run.run_dirs[seed], "events.out.tfevents.*")):
            run.writers.append(SummaryWriter(run.run_dirs[seed], purge_step=run.global_step if resumed else None))
        if not resumed:
            run.writers[-1].add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(
                f"|{k}|{v}|" for k, v in run.config_args[seed].items()))
    run.evaluations_logs, run.plasticity_logs = ([CsvLog(os.path.join(run.run_dirs[seed], name), CSV_LOGS[name])
                                                  for seed in seeds] for name in CSV_LOGS)


def print_header(run: Run, notes: tuple, resumed: bool) -> None:
    """What runs where: method, setting, schedule, seeds, device, threads, the method's notes, the directories."""
    args, seeds, device = run.args, run.seeds, run.device
    print(f"{method_name(args)} on {args.env_id} {args.experiment}"
          f"{'' if args.experiment == 'none' else '/' + args.strategy}: {run.num_tasks} task(s) x "
          f"{args.steps_per_task} steps, seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} on {device}"
          + ("" if device.type == "cuda" or not torch.cuda.is_available()
             else f" (CUDA from --num-seeds {CUDA_MIN_SEEDS} or with --cuda)"))
    print(f"  task schedule: {'; '.join(run.env.task_description(i) for i in range(run.num_tasks))}")
    print(f"  simulations: {run.env.num_sims} training on {run.env.nthread} thread(s), {run.eval_env.num_sims} "
          f"evaluation on {run.eval_env.nthread}")
    for note in notes:
        print(f"  {note}")
    if (fewest := fewest_evaluations_per_task(args.steps_per_task, run.num_tasks, args.eval_frequency)) < 3:
        every = max(args.steps_per_task // 10 // args.num_envs, 1) * args.num_envs
        print(f"  note: --eval-frequency {args.eval_frequency} evaluates {fewest} time(s) in a task of "
              f"{args.steps_per_task} steps, too few for a curve; --eval-frequency {every} gives 10")
    for seed in seeds:
        print(f"  writes {run.run_dirs[seed]}")
    for seed in seeds if resumed else ():
        print(f"resuming {run.run_dirs[seed]} from global_step {run.global_step} (task {run.task_index})")


def start_session(run: Run, resumed: bool) -> None:
    """The stop signals, rollout buffers, evaluations and checkpoints due, clocks, progress; evaluates step 0."""
    args, num_seeds = run.args, len(run.seeds)
    run.stop_signal = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, frame: run.stop_signal.append(received))

    shape = (num_seeds, args.num_steps, args.num_envs)
    run.buffers = SimpleNamespace(
        obs=np.zeros((*shape, run.env.observation_dim), np.float32),
        next_obs=np.zeros((*shape, run.env.observation_dim), np.float32),
        actions=np.zeros((*shape, run.env.action_dim), np.float32),
        **{name: np.zeros(shape, np.float32) for name in ("rewards", "raw_rewards", "terminations", "dones")})
    run.seed_rows = torch.arange(num_seeds, device=run.device)[:, None]  # gathers each seed's own minibatch

    run.eval_points = [s for s in evaluation_steps(args.steps_per_task, run.num_tasks, args.eval_frequency)
                       if s > run.global_step]
    run.session_start, run.wall_mark = (run.global_step, dict(run.timers)), time.perf_counter()
    run.progress = Progress(run.total_steps, run.global_step)
    if not resumed:
        evaluate(run, 0)
    run.obs = network_input(run.obs_rms, run.raw_obs, args)
    run.next_checkpoint = run.global_step + args.checkpoint_frequency if args.checkpoint_frequency else math.inf


def wandb_run_id(run_dir: str) -> str:
    """The W&B run id of a run directory, kept in wandb_id.txt so that a resumed run continues it."""
    path = os.path.join(run_dir, "wandb_id.txt")
    if os.path.exists(path):
        with open(path) as f:
            if (wandb_id := f.read().strip()).isalnum():
                return wandb_id
    wandb_id = secrets.token_hex(4)  # 8 characters of [0-9a-f], within W&B's id alphabet
    atomic_write_bytes(path, lambda f: f.write(wandb_id.encode()))
    return wandb_id


def finish_run(run: Run) -> int:
    """The final checkpoint and each seed's summary.json when the run finished; logs closed; the exit code."""
    run.progress.bar.close()
    timers, seeds = run.timers, run.seeds
    timers["wall"] += time.perf_counter() - run.wall_mark
    train_time = timers["wall"] - timers["eval"] - timers["plasticity"]
    if run.exit_code == 0:
        write_checkpoint(run)
        for k, seed in enumerate(seeds):
            summary = {"status": "finished", "global_step": run.global_step,
                       "train_sps": run.global_step / max(train_time, 1e-9), "wall_time_s": timers["wall"],
                       "train_time_s": train_time, "eval_time_s": timers["eval"],
                       "plasticity_time_s": timers["plasticity"], "nonfinite_skips": int(run.nonfinite_skips_total[k]),
                       "num_seeds": len(seeds), "group_train_sps": len(seeds) * run.global_step / max(train_time, 1e-9),
                       "device": run.device.type}
            atomic_write_bytes(os.path.join(run.run_dirs[seed], "summary.json"),
                               lambda f: f.write(json.dumps(summary, indent=2).encode()))
        print(f"finished {', '.join(run.run_dirs[seed] for seed in seeds)}: {run.global_step} steps per seed, train "
              f"SPS {summary['group_train_sps']:.0f} ({summary['train_sps']:.0f} per seed), "
              f"eval {timers['eval']:.1f} s")
    for log in run.evaluations_logs + run.plasticity_logs:
        os.close(log.fd)
    for writer, seed in zip(run.writers, seeds):
        with writing(os.path.join(run.run_dirs[seed], "events.out.tfevents.*")):
            writer.close()
    if run.args.track:
        import wandb

        wandb.finish()
    return run.exit_code


# ---- The command line ----


RULES = {"a positive integer": lambda value: value >= 1, "> 0": lambda value: value > 0,
         ">= 0": lambda value: value >= 0, "a finite number >= 0": lambda value: 0 <= value < math.inf,
         "in [0, 1]": lambda value: 0 <= value <= 1, "in (0, 1]": lambda value: 0 < value <= 1}  # NaN breaks each


def check_flags(args: Args, rules: dict) -> None:
    """ValueError naming the flag, what it must be and its value, for the first field that breaks its rule: ``rules``
    maps fields (names split by spaces) to a text of RULES, e.g. {"gamma": "in (0, 1]"}, or to (a test, its text)."""
    for names, rule in rules.items():
        valid, text = (RULES[rule], rule) if isinstance(rule, str) else rule
        for name in (name for name in names.split() if not valid(getattr(args, name))):
            raise ValueError(f"--{name.replace('_', '-')} must be {text}, got {getattr(args, name)}")


def validate_args(args: Args) -> None:
    """Reject a bad configuration up front, naming the flag and its range: the run's flags, then validate_method's."""
    nonstationary_envs.validate_setting(args.env_id, args.experiment, args.strategy, args.friction_mode)
    tasks = len(nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy))
    check_flags(args, {
        "num_steps num_envs eval_episodes max_episode_steps max_nonfinite_skips save_states_every plasticity_states "
        "torch_threads num_seeds": "a positive integer", "max_grad_norm normalization_clip": "> 0",
        "steps_per_task eval_frequency": (lambda value: value >= 1 and value % args.num_envs == 0,
                                          f"a positive multiple of --num-envs {args.num_envs}"),
        "minibatch_size": (lambda value: value >= 1 and (args.num_steps * args.num_envs) % value == 0,
                           f"a divisor of num_steps * num_envs = {args.num_steps * args.num_envs}"),
        "num_tasks": (lambda value: 0 <= value <= tasks,
                      f"in [0, {tasks}] for {args.experiment}/{args.strategy} (0 = all {tasks} tasks)"),
        "env_threads": (RULES[">= 0"], ">= 0 (0 = the CPUs this process may use)"),
        "checkpoint_frequency": (RULES[">= 0"], ">= 0 (0 = only at task ends)"),
        "run_dir": (lambda value: args.num_seeds == 1 or value is None or "{seed}" in value, f"a path with {{seed}} "
                    f"(e.g. runs/my_run/seed{{seed}}: a directory per seed) with --num-seeds {args.num_seeds}"),
        "track": (lambda value: args.num_seeds == 1 or not value, f"off with --num-seeds {args.num_seeds} (one W&B run "
                  "per process: `wandb sync` the seeds' run directories afterwards)")})
    if not args.include_cfrc_ext_in_observation and args.env_id != "Ant-v5":
        raise ValueError(f"--no-include-cfrc-ext-in-observation applies to Ant-v5 only, not {args.env_id}")
    validate_method(args)


HELP_GLUE = ("(default:", "Algorithm", "Appendix", "Eq.", "Sec.", "line", "=", "+", "-", "x", "*", "/", ">=", "<=",
             "<-", "->")  # the words a --help line never ends with, then the operators it never starts with


def help_glued(text: str) -> str:
    """``text`` with no-break spaces where --help must not break a line (HELP_GLUE)."""
    tokens = text.split(" ")
    glue = [not before.endswith(",") and (before in HELP_GLUE or token in HELP_GLUE[6:] or re.match(r"-?[0-9]", token))
            for before, token in zip(tokens, tokens[1:])]
    return tokens[0] + "".join(("\u00a0" if keep else " ") + token for keep, token in zip(glue, tokens[1:]))


def readable_tyro_help() -> None:
    """Patches of tyro 1.0.17's --help: paragraphs rewrapped, no breaks mid-expression, the description wrapped."""
    import tyro._arguments
    import tyro._backends._tyro_help_formatting as help_formatting
    import tyro._strings

    def glue(text):
        text._segments = tuple(help_glued(part) if isinstance(part, str) else glue(part) for part in text._segments)
        return text

    if getattr(help_formatting.format_help, "readable", False):
        return
    tyro._strings.remove_single_line_breaks = lambda text: "\n\n".join(" ".join(block.split())
                                                                       for block in re.split(r"\n\s*\n", text))
    argument_helptext, format_help = tyro._arguments.generate_argument_helptext, help_formatting.format_help
    tyro._arguments.generate_argument_helptext = lambda *args, **kwargs: glue(argument_helptext(*args, **kwargs))
    help_formatting.format_help = lambda *args, **kwargs: [
        wrapped for line in format_help(*args, **kwargs) for wrapped in (
            textwrap.wrap(line, shutil.get_terminal_size().columns) if len(line) > shutil.get_terminal_size().columns
            and not set(line) & set("│╭╰─") else [line.replace("\u00a0", " ")])]
    help_formatting.format_help.readable = True


def tyro_error_line(box: str) -> str:
    """tyro's boxed error as one line: its message, and for an unknown flag the closest of tyro's suggestions."""
    lines = [line.strip("╭╮╰╯│") for line in box.splitlines()[1:]]
    message = " ".join(" ".join(itertools.takewhile(lambda line: not set(line.strip()) <= set("─"), lines)).split())
    if "Perhaps you meant:" in box and (typo := re.search(r"Unrecognized options: (--[\w-]+)", message)):
        names = [name for line in lines if re.match(r" {1,5}--", line) for name in re.findall(r"--[\w-]+", line)]
        if names:
            closest = max(names, key=lambda name: difflib.SequenceMatcher(None, typo[1], name).ratio())
            message += f"; did you mean {closest}?"
    return f"{message} (`--help` lists the flags)"


def parse_args(argv: list) -> Args:
    """The command line as validated Args (RunConfigError otherwise); `--help | head` ends quietly."""
    import tyro

    readable_tyro_help()
    tyro_errors, pipe_handler = io.StringIO(), signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        with contextlib.redirect_stderr(tyro_errors):
            args = tyro.cli(Args, args=argv)
        sys.stdout.flush()
    except SystemExit as exit_status:
        sys.stdout.flush()
        if exit_status.code in (0, None):
            raise
        raise RunConfigError(tyro_error_line(tyro_errors.getvalue())) from None
    signal.signal(signal.SIGPIPE, pipe_handler)
    try:
        validate_args(args)
    except ValueError as error:
        raise RunConfigError(error) from None
    return args


def run_main(argv: list) -> int:
    """main(argv)'s exit code; a refused run (2) or a failed write (74) reported in one line."""
    try:
        return main(argv)
    except RunConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INVALID_CONFIG
    except (RunWriteError, OSError) as error:
        failed = failed_write(error.__cause__) if isinstance(error, RunWriteError) else error
        if failed is None or not isinstance(error, RunWriteError) and error.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        path = error.path if isinstance(error, RunWriteError) else error.filename or os.path.join(
            next(iter(RUN_DIR_LOCKS), "."), "events.out.tfevents.*")
        try:
            free = f"{shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free / 2**20:.1f} MiB free on its disk"
        except OSError:
            free = "its disk's free space unknown"
        print(f"error: could not write {path} ({failed.strerror or failed}; {free}); nothing already logged was lost "
              "(the last checkpoint and every logged row are whole); free some space, then re-run the same command to "
              f"resume: {shlex.join(['python', *sys.argv])} (exit code {EXIT_DISK_FULL})", file=sys.stderr)
        return EXIT_DISK_FULL


if __name__ == "__main__":
    sys.exit(run_main(sys.argv[1:]))
