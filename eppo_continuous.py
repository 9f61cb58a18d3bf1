"""EPPO (Evidential Proximal Policy Optimization) for continuous control under non-stationary MuJoCo dynamics.

A copy of ppo_continuous.py in which every change is marked ``# EPPO:``, so that
``diff ppo_continuous.py eppo_continuous.py`` reads as the method (paper Sec. 3, Algorithm 1 in colour):
- The critic outputs the Normal-Inverse-Gamma parameters (omega, nu, alpha, beta) of the value (Sec. 3.1):
  E[V] = omega, var[V] = beta/(alpha-1) (aleatoric) + beta/(nu(alpha-1)) (epistemic).
- It is trained on the Student-t negative log marginal likelihood (Eq. loss_nll) minus xi times the log
  hyperprior N(omega|0,100^2) Gam(nu|5,1) Gam(alpha-1|5,1) Gam(beta|5,1) (Sec. 3.1, Appendix B).
- The value variance is propagated through GAE (Eq. gae_var for EPPO_cor, Eq. gae_var_ind for EPPO_ind) and
  the advantages become upper confidence bounds A + kappa * sqrt(var[A]) (Eq. ucb); EPPO_mean uses kappa = 0.
- As in Algorithm 1 the returns (the critic's targets) are computed after the bonus is added
  (``--no-ucb-in-returns`` trains the critic on the mean advantage's return instead).
- The choices the paper leaves open are flags (docs/eppo_open_choices.md): ``--critic-loss mse`` (the control: PPO's
  MSE on omega), ``--hyperprior-reduction``, ``--evidence-init``, ``--evidence-transform``, ``--no-norm-reward``.

TensorBoard tags under ``evidential/``, one point per update in each seed's own run directory (that seed's means over
the rollout the update used, or over its update's minibatch steps where noted):
- omega, nu, alpha, beta; aleatoric_variance beta/(alpha-1), epistemic_variance beta/(nu(alpha-1)) (Sec. 3.1);
- advantage_std sqrt(var[A]) (Eq. gae_var / gae_var_ind) and ucb_bonus kappa sqrt(var[A]) (Eq. ucb);
- student_t_scale: sqrt(beta(1+nu)/(nu alpha)), the scale of the Student-t likelihood that the NLL fits;
- targets_outside_2_scales: fraction of targets R with |R - omega| > 2 scales (about 5% for a calibrated critic with
  a large alpha, up to 18% at alpha = 1; far more means the critic is overconfident);
- zeta: (alpha+1/2) nu / (nu (R-omega)^2 + 2 beta (1+nu)), the factor by which the NLL rescales MSE's gradient on
  omega (paper, "Plasticity preservation through evidential value learning"); > 1: larger steps than PPO's;
- critic_grad_norm: the critic's gradient norm before clipping at --max-grad-norm (minibatch mean);
- grad_share_omega, grad_share_nu, grad_share_alpha, grad_share_beta: each head row's share of the head's squared
  gradient norm (weight and bias rows; minibatch mean): which output drives the critic's update.

Everything else is the PPO template (paper Appendix B); its notes follow.
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
- ``--num-seeds K`` trains seeds seed, ..., seed + K - 1 in one process as K independent agents: every network
  holds K stacked copies (``StackedLinear``: one batched matmul serves all seeds), each seed has its own
  environments, normalization, random generator, optimizer slice and run directory, and everything that
  reduces over samples (losses, advantage normalization, gradient clipping, non-finite skips) reduces per seed.
  The math below is written for one seed: its reductions run over the last (sample) axis, so the same lines
  serve a leading seed axis. On the CPU a seed's results do not depend on K or on its position in the batch.
"""

import contextlib
import copy
import csv
import dataclasses
import io
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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

EXIT_INVALID_CONFIG = 2
EXIT_NONFINITE = 3
EXIT_PREEMPTED = 75
CHECKPOINT_FORMAT = 2  # 2: every tensor of the per-seed state has a leading seed axis of length 1
# Args that may change between a run and its resumption without changing the experiment (a seed's results do
# not depend on the other seeds trained beside it, so the group it runs in may change too).
RESUME_IGNORED_ARGS = ("overwrite", "cuda", "track", "wandb_project_name", "wandb_entity", "max_nonfinite_skips",
                       "num_seeds", "run_dir", "env_threads")
# From this many seeds per process up, the default (`--cuda` not given explicitly) trains on CUDA when it is
# available: below it one CPU core is faster (docs/batched-seeds.md has the measurements).
CUDA_MIN_SEEDS = 8
# EPPO: the advantage-variance variants of Algorithm 1.
GAE_VARIANTS = ("mean", "cor", "ind")
# EPPO: softplus can underflow to exactly 0 in float32, and 1 + softplus(h) rounds to exactly 1 whenever
# softplus(h) < 2**-24 (half an ulp of 1). The floors keep nu, beta > 0 and alpha - 1 > 0 representable:
# 1e-6 is about 8 ulp of 1.0 in float32 (eps 1.19e-7), so alpha = 1 + 1e-6 stays distinct from 1, while it is
# far below any value the Gam(5, 1) hyperpriors (mean 5) favour, so it never shapes a trained critic.
EVIDENCE_FLOOR = 1e-6
# EPPO: the paper's selected kappa per setting (its table "tab:kappa_values"), the file the sweeps read too.
PAPER_KAPPA_CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "paper_kappa.csv")
# EPPO: kappa of cor/ind where the paper selected none (the stationary env, an env of no paper setting).
FALLBACK_KAPPA = 0.1
# EPPO: the choices the paper leaves open (docs/eppo_open_choices.md); the first of each is the default.
CRITIC_LOSSES = ("nll", "mse")
HYPERPRIOR_REDUCTIONS = ("mean", "sum", "once")
EVIDENCE_INITS = ("default", "prior-mode")
EVIDENCE_TRANSFORMS = ("softplus", "exp")
# EPPO: exp's input is capped so that exp never overflows: exp(20) = 4.9e8 keeps nu, alpha, beta, the NLL's lgamma
# terms and var[V] finite in float32 (above the cap the gradient is 0, like a saturated softplus's is not).
EXP_INPUT_MAX = 20.0
# EPPO: --evidence-init prior-mode scales the nu, alpha, beta weight rows by this, so the evidence starts near the
# hyperpriors' modes for every state.
PRIOR_MODE_WEIGHT_SCALE = 0.01



@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment (part of the default run directory)"""
    seed: int = 1
    """seed of the experiment (the evaluation environments use seed + 100)"""
    num_seeds: int = 1
    """train seeds seed, seed + 1, ..., seed + num_seeds - 1 in this process as independent agents (batched)"""
    torch_deterministic: bool = True
    """make torch deterministic (`torch.use_deterministic_algorithms`; see docs/long-runs.md for the CUDA cost)"""
    cuda: bool = True
    """use CUDA when it is available and --num-seeds >= CUDA_MIN_SEEDS (faster there, measured); an explicit
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
    num_envs: int = 1
    """the number of parallel training environments per seed (stepped in this process)"""
    env_threads: int = 1
    """step the environments of all seeds from this many threads (MuJoCo releases the GIL in mj_step); results
    do not depend on it; 1 steps them in the main thread"""

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

    # EPPO: evidential critic and optimistic advantages (paper Sec. 3, Appendix B)
    variant: Literal["mean", "cor", "ind"] = "ind"
    """advantage variance: mean (no bonus, EPPO_mean), cor (Eq. gae_var, EPPO_cor), ind (Eq. gae_var_ind, EPPO_ind)"""
    kappa: Optional[float] = None
    """confidence radius of the UCB advantage A + kappa * sqrt(var[A]) (Eq. ucb); must be 0 with --variant mean.
    Default: 0 for mean; for cor/ind the paper's kappa for the setting (scripts/paper_kappa.csv), else 0.1"""
    ucb_in_returns: bool = True
    """train the critic on R = A_UCB + omega as in Algorithm 1; --no-ucb-in-returns uses R = A_mean + omega"""
    xi: float = 0.01
    """weight of the log hyperprior in the critic loss L = NLL - xi * log p(omega, nu, alpha, beta)"""
    omega_prior_loc: float = 0.0
    """mean of the normal hyperprior on omega"""
    omega_prior_scale: float = 100.0
    """standard deviation of the normal hyperprior on omega"""
    nu_prior_shape: float = 5.0
    """shape of the gamma hyperprior on nu"""
    nu_prior_rate: float = 1.0
    """rate of the gamma hyperprior on nu"""
    alpha_prior_shape: float = 5.0
    """shape of the gamma hyperprior on alpha - 1"""
    alpha_prior_rate: float = 1.0
    """rate of the gamma hyperprior on alpha - 1"""
    beta_prior_shape: float = 5.0
    """shape of the gamma hyperprior on beta"""
    beta_prior_rate: float = 1.0
    """rate of the gamma hyperprior on beta"""
    critic_loss: Literal["nll", "mse"] = "nll"
    """nll: the evidential loss NLL - xi log p(m) (Eq. loss_nll); mse: the control, PPO's MSE (omega - R)^2 on omega
    only (no NLL, no hyperprior: the nu, alpha, beta outputs get no gradient and are only logged)"""
    hyperprior_reduction: Literal["mean", "sum", "once"] = "mean"
    """how xi's hyperprior is reduced over a minibatch of M (the NLL is always the per-sample mean): mean (Algorithm 1)
    weighs -log p by xi per sample, sum by xi * M (summed prior), once by xi / M (one prior per minibatch)"""
    evidence_init: Literal["default", "prior-mode"] = "default"
    """default: the head's orthogonal init (std 1); prior-mode: nu, alpha - 1, beta start at the gamma hyperpriors'
    modes ((shape - 1) / rate = 4 for Gam(5, 1)) with their weight rows scaled by 0.01"""
    evidence_transform: Literal["softplus", "exp"] = "softplus"
    """the positivity transform of the head's nu, alpha - 1, beta outputs (the paper does not name one)"""



def method_name(args: Args) -> str:
    """The method's name in result tables (sweeps and summaries use it).

    EPPO: EPPO_mean, EPPO_cor, EPPO_ind; a run that departs from the paper's settings or from our readings of its
    open choices (docs/eppo_open_choices.md) gets them appended, e.g. EPPO_mean+mse or EPPO_ind+xi1+prior-mode, so
    that an ablation never shares a table cell with the method itself.
    """
    defaults = Args()
    changes = [("mse", args.critic_loss != defaults.critic_loss),
               (f"xi{args.xi:g}", args.xi != defaults.xi),
               (f"hp-{args.hyperprior_reduction}", args.hyperprior_reduction != defaults.hyperprior_reduction),
               (args.evidence_init, args.evidence_init != defaults.evidence_init),
               (args.evidence_transform, args.evidence_transform != defaults.evidence_transform),
               ("no-norm-reward", args.norm_reward != defaults.norm_reward),
               ("no-ucb-in-returns", args.ucb_in_returns != defaults.ucb_in_returns)]
    return "+".join([f"EPPO_{args.variant}"] + [name for name, changed in changes if changed])


def default_kappa(args: Args, kappa_csv: str = PAPER_KAPPA_CSV) -> tuple[float, str]:
    """EPPO: the kappa a run without --kappa uses, and where it comes from (printed at the start).

    0 for EPPO_mean (no bonus); for cor/ind the paper's kappa for the setting (Appendix B selects it per setting
    and variant by a grid search on seeds 1001-1003), or FALLBACK_KAPPA where the paper selected none.
    """
    if args.variant == "mean":
        return 0.0, "EPPO_mean has no bonus"
    env_name = args.env_id.split("-")[0]
    with open(kappa_csv, newline="") as f:
        for row in csv.DictReader(f):
            if (row["experiment"], row["env"], row["strategy"]) == (args.experiment, env_name, args.strategy):
                return float(row[f"kappa_{args.variant}"]), (f"the paper's for {args.experiment}/{env_name}/"
                                                               f"{args.strategy} (scripts/paper_kappa.csv)")
    return FALLBACK_KAPPA, "the paper selected none for this setting; --kappa sets it"


def make_env(args: Args, seed: int) -> gym.Env:
    """One non-stationary environment; the rollout steps ``env.unwrapped`` directly (no wrapper overhead)."""
    env = nonstationary_envs.make_nonstationary_env(
        args.env_id, args.experiment, args.strategy, friction_mode=args.friction_mode
    )
    env.action_space.seed(seed)
    return env


def aligned(x: torch.Tensor) -> torch.Tensor:
    """x itself when its data starts on a 64-byte boundary, else an aligned copy: MKL takes another code path for
    misaligned data (other rounding), so a seed's slice of a stacked tensor must not be computed misaligned."""
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
    """One ``nn.Linear`` per seed: ``weight[k]`` (out x in) and ``bias[k, 0]`` are seed k's parameters, and
    x (seeds, samples, in) -> (seeds, samples, out).

    On CUDA one batched matmul serves all seeds. On the CPU each seed gets its own ``F.linear``: MKL's batched
    matmul changes its blocking with the number of matrices, which would make a seed's results depend on the
    seeds beside it, and batching saves no arithmetic on one core anyway.
    """

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
    """One ``nn.LayerNorm`` per seed (elementwise affine parameters of shape (seeds, 1, dim))."""

    def __init__(self, num_seeds: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_seeds, 1, dim))
        self.bias = nn.Parameter(torch.zeros(num_seeds, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias, F.layer_norm(x, x.shape[-1:]), self.weight)


def layer_init(layer: StackedLinear, generators: list, std: float = np.sqrt(2), bias_const: float = 0.0) -> StackedLinear:
    """CleanRL's orthogonal initialization, seed k's slice drawn from seed k's generator only."""
    with torch.no_grad():
        for weight, generator in zip(layer.weight, generators):
            torch.nn.init.orthogonal_(weight, std, generator=generator)
        layer.bias.fill_(bias_const)
    return layer


def mlp_trunk(input_dim: int, hidden_dim: int, generators: list) -> nn.Sequential:
    """Linear -> LayerNorm -> ReLU, twice (paper, Appendix B)."""
    num_seeds = len(generators)
    return nn.Sequential(
        layer_init(StackedLinear(num_seeds, input_dim, hidden_dim), generators),
        StackedLayerNorm(num_seeds, hidden_dim),
        nn.ReLU(),
        layer_init(StackedLinear(num_seeds, hidden_dim, hidden_dim), generators),
        StackedLayerNorm(num_seeds, hidden_dim),
        nn.ReLU(),
    )


def evidence_transform(raw: torch.Tensor, transform: str = "softplus") -> torch.Tensor:
    """EPPO: the positivity transform of the head's nu, alpha - 1, beta outputs (--evidence-transform; Sec. 3.1 only
    says that one is added to alpha): softplus, or exp with its input capped at EXP_INPUT_MAX."""
    if transform == "softplus":
        return F.softplus(raw)
    if transform == "exp":
        return torch.exp(raw.clamp(max=EXP_INPUT_MAX))
    raise ValueError(f"unknown evidence transform {transform!r}; valid choices: {', '.join(EVIDENCE_TRANSFORMS)}")


def inverse_evidence_transform(value: float, transform: str = "softplus") -> float:
    """EPPO: the head output that ``evidence_transform`` maps to ``value`` > 0 (softplus^-1(v) = v + log(1 - e^-v))."""
    if transform == "softplus":
        return value + math.log(-math.expm1(-value))
    if transform == "exp":
        return math.log(value)
    raise ValueError(f"unknown evidence transform {transform!r}; valid choices: {', '.join(EVIDENCE_TRANSFORMS)}")


def gamma_mode(shape: float, rate: float) -> float:
    """EPPO: the mode (shape - 1) / rate of Gam(shape, rate), defined for shape > 1 (4 for the paper's Gam(5, 1))."""
    if not shape > 1:
        raise ValueError(f"Gam({shape}, {rate}) has its mode at 0 (shape <= 1)")
    return (shape - 1.0) / rate


class EvidentialCritic(nn.Module):
    """EPPO: PPO's critic trunk with a 4-output head for the NIG parameters (omega, nu, alpha, beta) (Sec. 3.1), for
    every seed: (seeds, samples, obs_dim) -> four (seeds, samples) tensors.

    ``init_modes`` = (nu, alpha - 1, beta) starts the evidence at these values (--evidence-init prior-mode): the
    head's bias rows map to them and their weight rows are scaled by PRIOR_MODE_WEIGHT_SCALE (no extra random draws).
    """

    def __init__(self, obs_dim: int, hidden_dim: int, generators: list, transform: str = "softplus",
                 init_modes: Optional[tuple] = None):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, hidden_dim, generators)
        self.head = layer_init(StackedLinear(len(generators), hidden_dim, 4), generators, std=1.0)
        self.transform = transform
        if init_modes is not None:
            with torch.no_grad():
                self.head.weight[:, 1:] *= PRIOR_MODE_WEIGHT_SCALE
                for row, mode in enumerate(init_modes, start=1):
                    self.head.bias[..., row] = inverse_evidence_transform(mode - EVIDENCE_FLOOR, transform)

    def forward(self, x: torch.Tensor) -> tuple:
        # The transforms see strided views of the head's output, which the CPU computes element by element (no
        # vectorized body and scalar tail whose roundings differ), so a seed's evidence does not depend on K.
        raw_omega, raw_nu, raw_alpha, raw_beta = self.head(self.trunk(x)).unbind(-1)
        nu = evidence_transform(raw_nu, self.transform) + EVIDENCE_FLOOR
        # alpha > 1 keeps var[V] finite (Sec. 3.1, footnote)
        alpha = evidence_transform(raw_alpha, self.transform) + 1.0 + EVIDENCE_FLOOR
        beta = evidence_transform(raw_beta, self.transform) + EVIDENCE_FLOOR
        return raw_omega, nu, alpha, beta

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
    """Diagonal Gaussian policy of every seed with a state-independent log standard deviation."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_dim: int, generators: list):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, hidden_dim, generators)
        self.mean_head = layer_init(StackedLinear(len(generators), hidden_dim, action_dim), generators, std=0.01)
        self.log_std = nn.Parameter(torch.zeros(len(generators), 1, action_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mean_head(self.trunk(x))

    features = EvidentialCritic.features
    hidden_activations = EvidentialCritic.hidden_activations


def single_seed_network(network: nn.Module, seed_index: int) -> nn.Module:
    """A copy of a stacked network that holds only seed ``seed_index``'s parameters (a one-seed network)."""
    single = copy.deepcopy(network)
    for parameter, source in zip(single.parameters(), network.parameters()):
        parameter.data = source.data[seed_index : seed_index + 1].clone()
    return single


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """log N(actions | mean, exp(log_std)^2) summed over action dimensions (closed form, no torch.distributions)."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    return (log_std + 0.5 * (1.0 + math.log(2 * math.pi))).sum(-1)


def nig_nll(y: torch.Tensor, omega: torch.Tensor, nu: torch.Tensor, alpha: torch.Tensor,
            beta: torch.Tensor) -> torch.Tensor:
    """EPPO: elementwise negative log marginal likelihood -log St(y | omega, beta(1+nu)/(nu alpha), 2 alpha).

    Paper Eq. (loss_nll) with Omega = 2 beta (1 + nu):
        0.5 log(pi/nu) - alpha log Omega + (alpha + 1/2) log((y - omega)^2 nu + Omega)
        + log Gamma(alpha) - log Gamma(alpha + 1/2).
    Evaluated in the algebraically equal form
        0.5 (log pi - log nu + log Omega) + (alpha + 1/2) log1p((y - omega)^2 nu / Omega) + lgamma terms,
    which avoids the cancellation between -alpha log Omega and (alpha + 1/2) log(...) (both grow
    with alpha) and the overflow of log((y - omega)^2 nu + Omega) for large errors.
    """
    log_omega_cap = torch.log(2.0 * beta) + torch.log1p(nu)  # log Omega, exact for small nu
    squared_error_ratio = (y - omega).square() * nu / (2.0 * beta * (1.0 + nu))
    return (0.5 * (math.log(math.pi) - torch.log(nu) + log_omega_cap) + (alpha + 0.5) * torch.log1p(squared_error_ratio)
            + torch.lgamma(alpha) - torch.lgamma(alpha + 0.5))


def _gamma_log_pdf(x: torch.Tensor, shape: float, rate: float) -> torch.Tensor:
    """log Gam(x | shape, rate) with the shape/rate parametrization (mean shape/rate)."""
    return shape * math.log(rate) - math.lgamma(shape) + (shape - 1.0) * torch.log(x) - rate * x


def nig_log_hyperprior(omega: torch.Tensor, nu: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor,
                       omega_loc: float = 0.0, omega_scale: float = 100.0, nu_shape: float = 5.0, nu_rate: float = 1.0,
                       alpha_shape: float = 5.0, alpha_rate: float = 1.0, beta_shape: float = 5.0,
                       beta_rate: float = 1.0) -> torch.Tensor:
    """EPPO: elementwise log p(m) of the hyperpriors (paper Sec. 3.1 and Table tab:shared_hyperparameters).

    log N(omega | omega_loc, omega_scale^2) + log Gam(nu | 5, 1) + log Gam(alpha - 1 | 5, 1)
    + log Gam(beta | 5, 1); the alpha prior is shifted by +1 (table footnote) so alpha > 1.
    One term per evidential parameter, as in the plate model: Algorithm 1 writes log p(nu) twice
    and omits log p(beta), which we read as a typo.
    """
    log_p_omega = (-0.5 * math.log(2.0 * math.pi) - math.log(omega_scale)
                   - 0.5 * ((omega - omega_loc) / omega_scale).square())
    return (log_p_omega + _gamma_log_pdf(nu, nu_shape, nu_rate) + _gamma_log_pdf(alpha - 1.0, alpha_shape, alpha_rate)
            + _gamma_log_pdf(beta, beta_shape, beta_rate))


def nig_variance_split(nu: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> tuple:
    """EPPO: (aleatoric, epistemic) variance of the value: E[sigma^2] = beta/(alpha-1), var[mu] = beta/(nu(alpha-1))."""
    aleatoric = beta / (alpha - 1.0)
    return aleatoric, aleatoric / nu


def nig_value_variance(nu: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """EPPO: var[V] = beta/(alpha-1) * (1 + 1/nu), the law of total variance in paper Sec. 3.1."""
    aleatoric, epistemic = nig_variance_split(nu, alpha, beta)
    return aleatoric + epistemic


def student_t_scale(nu: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """EPPO: the scale sqrt(beta (1 + nu) / (nu alpha)) of the value's Student-t marginal St(omega, ., 2 alpha)
    (Sec. 2.2); logged as evidential/student_t_scale, the width of the likelihood that the NLL fits."""
    return torch.sqrt(beta * (1.0 + nu) / (nu * alpha))


def nll_error_rescaling(error: torch.Tensor, nu: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """EPPO: zeta = (alpha + 1/2) nu / (nu error^2 + 2 beta (1 + nu)), the factor by which the NLL's gradient on omega
    rescales MSE's, dNLL/domega = -zeta 2 (y - omega) (paper, paragraph "Plasticity preservation through evidential
    value learning"); zeta > 1 means larger omega steps than PPO's for the same error."""
    return (alpha + 0.5) * nu / (nu * error.square() + 2.0 * beta * (1.0 + nu))


def hyperprior_weight(xi: float, reduction: str, minibatch_size: int) -> float:
    """EPPO: the per-sample weight w of -log p(m) in L = mean(NLL) + w mean(-log p(m)) (--hyperprior-reduction).

    mean: Algorithm 1 averages both terms over the minibatch, w = xi. sum: the hyperprior summed over the minibatch
    beside the averaged NLL, w = xi M. once: the hyperprior counted once per minibatch against the summed NLL,
    (sum NLL + xi mean(-log p)) / M, w = xi / M. The NLL keeps its per-sample scale, so gradient clipping and Adam
    see the same NLL in all three.
    """
    weights = {"mean": xi, "sum": xi * minibatch_size, "once": xi / minibatch_size}
    if reduction not in weights:
        raise ValueError(f"unknown hyperprior reduction {reduction!r}; valid choices: {', '.join(HYPERPRIOR_REDUCTIONS)}")
    return weights[reduction]


def evidential_critic_loss(y: torch.Tensor, omega: torch.Tensor, nu: torch.Tensor, alpha: torch.Tensor,
                           beta: torch.Tensor, critic_loss: str = "nll", prior_weight: float = 0.01,
                           **hyperprior) -> tuple:
    """EPPO: (loss, mean NLL, mean -log p(m)) of a minibatch of targets y, means over the last (sample) axis: per seed.

    nll: L = mean NLL + prior_weight * mean(-log p(m)) (Eq. loss_nll, Sec. 3.1, Algorithm 1). mse (--critic-loss
    mse, the control): L = mean (omega - y)^2, PPO's value loss (Algorithm 1), so nu, alpha, beta get no gradient;
    the NLL and the hyperprior are still returned for logging.
    """
    nll = nig_nll(y, omega, nu, alpha, beta).mean(-1)
    negative_log_prior = -nig_log_hyperprior(omega, nu, alpha, beta, **hyperprior).mean(-1)
    if critic_loss == "nll":
        return nll + prior_weight * negative_log_prior, nll, negative_log_prior
    if critic_loss == "mse":
        return (omega - y).square().mean(-1), nll.detach(), negative_log_prior.detach()
    raise ValueError(f"unknown critic loss {critic_loss!r}; valid choices: {', '.join(CRITIC_LOSSES)}")


def head_gradient_shares(weight_grad: torch.Tensor, bias_grad: torch.Tensor) -> torch.Tensor:
    """EPPO: each output row's share of the squared gradient norm of a linear head (weight and bias rows together).

    For the evidential head the rows are (omega, nu, alpha, beta): the shares say which term of the critic loss
    drives the update. Row k's gradient is sum_i g_ik (h_i, 1) for the pre-activation gradients g, so it is 0 exactly
    when output k gets no gradient. Shares sum to 1 (all 0 for a zero gradient). Gradients (..., rows, in) and
    (..., rows): any leading seed axis gives each seed's own shares.
    """
    squared = weight_grad.square().sum(-1) + bias_grad.square()
    return squared / squared.sum(-1, keepdim=True).clamp_min(torch.finfo(squared.dtype).tiny)


def probabilistic_gae(rewards, values, value_vars, next_values, next_value_vars, terminations, dones,
                      gamma: float, gae_lambda: float, variant: str) -> tuple:
    """EPPO: mean and variance of generalized advantage estimation over a (T, ...) rollout (time first; any trailing
    seed/env axes) (Algorithm 1, lines 7-17).

    ``next_values[t]`` / ``next_value_vars[t]`` are the critic's mean / variance at the true next state s_{t+1}
    (the final observation when the episode was truncated), ``terminations[t]`` = 1 when s_{t+1} is terminal
    (its value is 0), ``dones[t]`` = 1 when the episode ended at t (termination or truncation), which stops the
    recursions. The advantage and the variance sum after the buffer's last step are 0 (its bootstrap is already
    in ``next_values``). Returns (advantages, advantage_vars); the variances are 0 for ``variant`` mean.
    """
    if variant not in GAE_VARIANTS:
        raise ValueError(f"unknown GAE variant {variant!r}; valid choices: {', '.join(GAE_VARIANTS)}")
    if variant != "mean" and not 0 < gae_lambda <= 1:
        raise ValueError(f"the {variant} advantage variance needs gae_lambda in (0, 1], got {gae_lambda}")
    decay = gamma * gae_lambda
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    continues = decay * (1.0 - dones)
    # S_t = sum_{l>=1} (gamma lambda)^{2l} var[V_{t+l}] within the episode, by the recursion of Algorithm 1
    # (line 13), except that a terminal s_{t+1} adds no variance: its value is the constant 0 (the delta above
    # drops it), not a critic prediction.
    next_value_var_terms = decay**2 * (1.0 - terminations) * next_value_vars
    var_continues = decay**2 * (1.0 - dones)
    # The outputs keep the inputs' memory layout, as gae's do (the script's: seeds, T, envs), so that each seed's
    # advantages are contiguous for the reductions over them
    advantages, future_value_vars = torch.zeros_like(rewards), torch.zeros_like(rewards)
    last_advantage = torch.zeros_like(rewards[0])
    last_future_var = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):  # one fused kernel per recursion and step (addcmul: a + b * c)
        last_advantage = torch.addcmul(deltas[t], continues[t], last_advantage, out=advantages[t])
        last_future_var = torch.addcmul(next_value_var_terms[t], var_continues[t], last_future_var,
                                        out=future_value_vars[t])
    if variant == "mean":
        return advantages, torch.zeros_like(advantages)
    future_weight = ((1.0 - gae_lambda) / gae_lambda) ** 2
    current_weight = 1.0 if variant == "cor" else (1.0 - gae_lambda) / (1.0 + gae_lambda)
    # Eq. (gae_var), EPPO_cor: var[V_t] + w S_t;  Eq. (gae_var_ind), EPPO_ind: (1-lambda)/(1+lambda) var[V_t] + w S_t
    return advantages, current_weight * value_vars + future_weight * future_value_vars


def ucb_advantages_and_returns(advantages: torch.Tensor, advantage_stds: torch.Tensor, values: torch.Tensor,
                               kappa: float, ucb_in_returns: bool) -> tuple:
    """EPPO: the UCB advantage A + kappa * sqrt(var[A]) (Eq. ucb) and the critic's targets R.

    Algorithm 1 (lines 18-19) adds the bonus before computing the returns R = A + omega, so the critic learns an
    optimistic target (``ucb_in_returns``); otherwise R = A_mean + omega, PPO's return of the mean advantage.
    """
    ucb_advantages = advantages + kappa * advantage_stds
    return ucb_advantages, (ucb_advantages if ucb_in_returns else advantages) + values



def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """(A - mean) / (std + 1e-8) over the samples (last axis) of each seed: Algorithm 1, line 19. Each seed's row
    is made contiguous first: a reduction over a strided row rounds differently, which would tie a seed's
    result to the layout of the tensor it shares with other seeds."""
    advantages = advantages.contiguous()
    return (advantages - advantages.mean(-1, keepdim=True)) / (advantages.std(-1, keepdim=True) + 1e-8)


class SeedwiseAdam(optim.Optimizer):
    """Adam for parameters stacked over seeds (seed axis first), with each seed's own step count, gradient
    clipping and step skipping.

    On the CPU each seed's slices go through torch's fused Adam kernel on their own: the kernel computes a
    tensor's last (size mod vector width) entries on a scalar path with other rounding, so stepping a stacked
    tensor at once would make a small parameter's update (a seed's 6 log-std entries) depend on the number of
    seeds. A seed's update is thus exactly that of ``optim.Adam(fused=True)`` in a one-seed run. On CUDA one
    kernel steps all seeds while their step counts agree. ``step(stepping)`` steps only the seeds where
    ``stepping`` is True: a skipped seed keeps its parameters, moments and step count.
    """

    def __init__(self, params, lr: float, betas: tuple = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))
        self.params = self.param_groups[0]["params"]
        self.num_seeds = len(self.params[0])
        for p in self.params:
            self.state[p].update(step=torch.zeros(self.num_seeds, device=p.device), exp_avg=torch.zeros_like(p),
                                 exp_avg_sq=torch.zeros_like(p))
        self.lockstep = True  # all seeds have taken the same number of steps
        self._seed_views = None

    def seed_views(self) -> list:
        """Per seed: views of its parameters, first and second moments and step counts (made once: these tensors
        live as long as the optimizer; gradients are new tensors after every backward, see seed_gradients)."""
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
    def clip_grad_norms_(self, max_norm: float) -> torch.Tensor:
        """``clip_grad_norm_`` for each seed separately; returns the per-seed norms before clipping."""
        norms = self.gradient_norms()
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
                               weight_decay=0.0, eps=group["eps"], maximize=False)
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
            adam_update(params, self.seed_gradients(k), exp_avgs, exp_avg_sqs, [], steps, fused=True,
                        **hyperparameters)


class RunningMeanStd:
    """Running mean/variance of a stream of arrays, one set of statistics per seed (parallel-variance update,
    as gymnasium's wrappers). Batches have shape (seeds, samples, *shape); statistics (seeds, 1, *shape)."""

    def __init__(self, num_seeds: int, shape=(), epsilon: float = 1e-4):
        self.mean = np.zeros((num_seeds, 1, *shape), np.float64)
        self.var = np.ones((num_seeds, 1, *shape), np.float64)
        self.count = epsilon  # the same for every seed: all seeds see one sample per env and step

    def update(self, batch: np.ndarray) -> None:
        batch_count = batch.shape[1]
        # np.var costs ~20 us per call; with one env per step the batch variance is simply 0
        if batch_count == 1:
            batch_mean, batch_var = batch, 0.0
        else:
            batch_mean, batch_var = batch.mean(axis=1, keepdims=True), batch.var(axis=1, keepdims=True)
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


def seed_slice(state, seed_index: int):
    """Seed ``seed_index``'s part of a stacked state: every tensor or array with a seed axis first keeps that
    axis, with length 1; other leaves (counts, step numbers, hyperparameters) are shared by all seeds."""
    if isinstance(state, dict):
        return {key: seed_slice(value, seed_index) for key, value in state.items()}
    if isinstance(state, list):
        return [seed_slice(value, seed_index) for value in state]
    if isinstance(state, torch.Tensor) and state.ndim > 0:
        return state[seed_index : seed_index + 1].clone()
    if isinstance(state, np.ndarray) and state.ndim > 0:
        return state[seed_index : seed_index + 1].copy()
    return state


def stack_seeds(states: list):
    """The inverse of ``seed_slice``: one stacked state from the per-seed states, in the given order."""
    first = states[0]
    if isinstance(first, dict):
        return {key: stack_seeds([state[key] for state in states]) for key in first}
    if isinstance(first, list):
        return [stack_seeds([state[i] for state in states]) for i in range(len(first))]
    if isinstance(first, torch.Tensor) and first.ndim > 0:
        return torch.cat(states)
    if isinstance(first, np.ndarray) and first.ndim > 0:
        return np.concatenate(states)
    return first


def step_envs(env_index: list, actions: np.ndarray, pool: Optional[ThreadPoolExecutor] = None, threads: int = 1) -> list:
    """``env.step`` of every (seed k, env i, env) of ``env_index`` with action ``actions[k, i]``, in that order.
    With a thread pool, thread j steps entries j, j + threads, ...: each env is stepped by one thread with its
    own model and data, so the results do not depend on the number of threads."""
    if pool is None:
        return [env.unwrapped.step(actions[k, i]) for k, i, env in env_index]
    shares = pool.map(lambda j: [env.unwrapped.step(actions[k, i]) for k, i, env in env_index[j::threads]], range(threads))
    transitions = [None] * len(env_index)
    for j, share in enumerate(shares):
        transitions[j::threads] = share
    return transitions


def evaluation_steps(steps_per_task: int, num_tasks: int, eval_frequency: int) -> list:
    """Global steps at which the paper evaluates: 0, every eval_frequency steps, and the last step of every task."""
    total = steps_per_task * num_tasks
    points = {0, *range(eval_frequency, total + 1, eval_frequency), *(steps_per_task * (i + 1) for i in range(num_tasks))}
    return sorted(points)


def evaluated_task(global_step: int, steps_per_task: int) -> int:
    """The task an evaluation at ``global_step`` measures: the task of the step that was just taken."""
    return max(global_step - 1, 0) // steps_per_task


def evaluate_policy(actor: Actor, eval_envs: list, task: int, obs_rms: RunningMeanStd, args: Args, seeds: list,
                    device, max_states: int = 0, pool: Optional[ThreadPoolExecutor] = None):
    """Run one episode per evaluation env with the deterministic (mean) action, on ``task``, with the observation
    statistics frozen. ``eval_envs[k][i]`` is seed ``seeds[k]``'s env i, reset with seeds[k] + 100 + i (paper,
    Appendix B), so an evaluation is a function of the policy and the statistics only; all seeds' episodes share
    one forward pass per step. Returns the undiscounted returns and episode lengths, (seeds, episodes), and per
    seed up to ``max_states`` normalized states spread evenly over its episodes (for the plasticity metrics)."""
    frozen_rms = copy.deepcopy(obs_rms)
    num_seeds, num_episodes = len(eval_envs), len(eval_envs[0])
    for seed_envs in eval_envs:
        for env in seed_envs:
            env.get_wrapper_attr("set_task")(task)
    obs = np.stack([[env.unwrapped.reset(seed=seed + 100 + i)[0] for i, env in enumerate(seed_envs)]
                    for seed, seed_envs in zip(seeds, eval_envs)])
    low, high = eval_envs[0][0].action_space.low, eval_envs[0][0].action_space.high
    returns, lengths = np.zeros((num_seeds, num_episodes)), np.zeros((num_seeds, num_episodes), dtype=np.int64)
    running = np.ones((num_seeds, num_episodes), dtype=bool)
    visited = [[] for _ in range(num_seeds)]
    stride = max(1, math.ceil(num_episodes * args.max_episode_steps / max(max_states, 1)))
    with torch.inference_mode():
        for t in range(args.max_episode_steps):
            if not running.any():
                break
            obs_norm = frozen_rms.normalize(obs, args.normalization_clip)
            if max_states and t % stride == 0:
                for k in range(num_seeds):
                    visited[k].append(obs_norm[k][running[k]])
            actions = np.clip(actor(torch.from_numpy(obs_norm).to(device)).cpu().numpy(), low, high)
            env_index = [(k, i, eval_envs[k][i]) for k, i in zip(*np.nonzero(running))]
            for (k, i, _), (obs[k, i], reward, terminated, _, _) in zip(
                    env_index, step_envs(env_index, actions, pool, args.env_threads)):
                returns[k, i] += reward
                lengths[k, i] += 1
                running[k, i] = not terminated and lengths[k, i] < args.max_episode_steps
    states = [np.concatenate(v)[:max_states] if v else np.zeros((0, obs.shape[-1]), np.float32) for v in visited]
    return returns, lengths, states


def validate_args(args: Args) -> None:
    """Reject a bad configuration up front, with a message that names the flag and the valid range."""
    nonstationary_envs.validate_setting(args.env_id, args.experiment, args.strategy, args.friction_mode)
    schedule_length = len(nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy))
    positive = ["steps_per_task", "num_steps", "num_envs", "minibatch_size", "update_epochs", "eval_frequency",
                "eval_episodes", "max_episode_steps", "max_nonfinite_skips", "save_states_every", "hidden_dim",
                "plasticity_states", "torch_threads", "num_seeds", "env_threads"]
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
    if args.num_seeds > 1:
        if args.run_dir is not None and "{seed}" not in args.run_dir:
            raise ValueError(f"--run-dir must contain {{seed}} with --num-seeds {args.num_seeds} (each seed writes its "
                             f"own run directory), e.g. --run-dir runs/my_run/seed{{seed}}")
        if args.track:
            raise ValueError("--track logs one run per process: use --num-seeds 1, or `wandb sync` the seeds' run "
                             "directories afterwards")
        if args.target_kl is not None:
            raise ValueError("--target-kl stops the update epochs of the whole process: use --num-seeds 1 with it")
    # EPPO: the evidential critic's and the UCB's settings
    if args.kappa is not None and not (math.isfinite(args.kappa) and args.kappa >= 0):
        raise ValueError(f"--kappa must be a finite number >= 0 (the UCB radius of Eq. ucb), got {args.kappa}")
    if args.variant == "mean" and args.kappa not in (None, 0):
        raise ValueError(f"--kappa must be 0 with --variant mean (EPPO_mean has no advantage variance, so there is "
                         f"no confidence bound to add), got {args.kappa}; use --variant cor or ind for a bonus")
    if args.variant != "mean" and args.gae_lambda == 0:
        raise ValueError(f"--gae-lambda must be > 0 with --variant {args.variant} (the variance weight "
                         "((1 - lambda) / lambda)^2 of Eq. gae_var diverges at 0)")
    if not (math.isfinite(args.xi) and args.xi >= 0):
        raise ValueError(f"--xi must be a finite number >= 0, got {args.xi}")
    for name in ("omega_prior_scale", "nu_prior_shape", "nu_prior_rate", "alpha_prior_shape", "alpha_prior_rate",
                 "beta_prior_shape", "beta_prior_rate"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) > 0):
            raise ValueError(f"--{name.replace('_', '-')} must be a finite number > 0, got {getattr(args, name)}")
    if not math.isfinite(args.omega_prior_loc):
        raise ValueError(f"--omega-prior-loc must be finite, got {args.omega_prior_loc}")
    for flag, value, choices in (("--critic-loss", args.critic_loss, CRITIC_LOSSES),
                                 ("--hyperprior-reduction", args.hyperprior_reduction, HYPERPRIOR_REDUCTIONS),
                                 ("--evidence-init", args.evidence_init, EVIDENCE_INITS),
                                 ("--evidence-transform", args.evidence_transform, EVIDENCE_TRANSFORMS)):
        if value not in choices:
            raise ValueError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")
    if args.evidence_init == "prior-mode":
        for name in ("nu_prior_shape", "alpha_prior_shape", "beta_prior_shape"):
            if not getattr(args, name) > 1:
                raise ValueError(f"--evidence-init prior-mode needs --{name.replace('_', '-')} > 1 (a gamma "
                                 f"hyperprior with a positive mode), got {getattr(args, name)}; or use default")
    if args.clip_vloss:
        raise ValueError("--clip-vloss is PPO's clipping of a point-value loss and is not defined for the evidential "
                         "critic's likelihood; use --no-clip-vloss (the default, as in the paper)")



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


def load_checkpoints(run_dir: str) -> list:
    """The readable checkpoints of a run directory, newest first (checkpoint.pt, then checkpoint.prev.pt)."""
    states = []
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        path = os.path.join(run_dir, name)
        if not os.path.exists(path):
            continue
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
            if state.get("format") == CHECKPOINT_FORMAT:
                states.append(state)
            else:
                warnings.warn(f"{path} has an unknown format; ignoring it")
        except Exception as error:  # a truncated or corrupt file: fall back to the previous checkpoint
            warnings.warn(f"{path} is unreadable ({type(error).__name__}: {error}); trying the previous checkpoint")
    return states


def load_checkpoint(run_dir: str) -> Optional[dict]:
    """The newest readable checkpoint (checkpoint.pt, else checkpoint.prev.pt), or None when there is none."""
    return next(iter(load_checkpoints(run_dir)), None)


def group_checkpoints(run_dirs: list) -> Optional[list]:
    """One checkpoint per seed, all at the same step: the newest step every seed's directory holds a readable
    checkpoint of (the seeds write theirs one after another, so a crash in between leaves them a step apart).
    None when the seeds share no step (a fresh start)."""
    by_step = [{state["global_step"]: state for state in load_checkpoints(run_dir)} for run_dir in run_dirs]
    common = set.intersection(*(set(steps) for steps in by_step))
    return [states[max(common)] for states in by_step] if common else None


def truncate_csv(path: str, last_step: int) -> None:
    """Drop rows logged after ``last_step`` (they will be logged again, identically, after a resume)."""
    if not os.path.exists(path):
        return
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    kept = [rows[0]] + [row for row in rows[1:] if row and int(row[0]) <= last_step]
    atomic_write_bytes(path, lambda f: f.write("".join(",".join(row) + "\n" for row in kept).encode()))


def last_logged_return(path: str) -> float:
    """return_mean of the last row of an evaluations.csv (NaN when it has none)."""
    if not os.path.exists(path):
        return float("nan")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return float(rows[-1]["return_mean"]) if rows else float("nan")


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


def foreign_flag_error(argv: list) -> Optional[str]:
    """A short error for a flag this script does not have, naming the sibling script that has it (tyro would
    only say "Unrecognized options"); None when every flag is this script's."""
    known = {"help", "h"}
    for field in dataclasses.fields(Args):
        name = field.name.replace("_", "-")
        known |= {name, f"no-{name}"}
    here = os.path.dirname(os.path.abspath(__file__))
    for token in argv:
        if not token.startswith("--") or token[2:].split("=")[0].replace("_", "-") in known:
            continue
        flag = token.split("=")[0]
        field = flag[2:].removeprefix("no-").replace("-", "_")
        owners = []
        for script in sorted(os.listdir(here)):
            if script.endswith("_continuous.py") and script != os.path.basename(__file__):
                with open(os.path.join(here, script)) as f:
                    if f"\n    {field}: " in f.read():
                        owners.append(script)
        where = f"it belongs to {' and '.join(owners)}" if owners else "no script of this repository has it"
        return f"{flag} is not a flag of {os.path.basename(__file__)}; {where} (`--help` lists this script's flags)"
    return None


def parse_args(argv: list) -> Args:
    """The command line as Args: tyro's parser, a short error for another script's flag, and a quiet exit when
    stdout closes early (`--help | head`), as command-line tools do."""
    import tyro

    error = foreign_flag_error(argv)
    if error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_INVALID_CONFIG)
    tyro_errors = io.StringIO()
    try:
        try:
            with contextlib.redirect_stderr(tyro_errors):
                return tyro.cli(Args, args=argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more may reach the closed pipe
        sys.exit(0)
    except SystemExit as exit_status:
        if exit_status.code in (0, None):
            raise
        # tyro's error is a box of several lines: keep its message, on one line
        lines = [line.strip("╭╮╰╯│ ") for line in tyro_errors.getvalue().splitlines()[1:]]
        message = " ".join(itertools.takewhile(lambda line: not set(line) <= set("─"), lines))
        print(f"error: {' '.join(message.split())} (`--help` lists the flags)", file=sys.stderr)
        sys.exit(EXIT_INVALID_CONFIG)


if __name__ == "__main__":
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    argv = sys.argv[1:]
    args = parse_args(argv)
    # EPPO: without --kappa, the paper's kappa for this setting (config.json stores the value used)
    kappa_source = "--kappa"
    if args.kappa is None:
        kappa, kappa_source = default_kappa(args)
        args = dataclasses.replace(args, kappa=kappa)
    try:
        validate_args(args)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_INVALID_CONFIG)

    # Seeds seed, ..., seed + num_seeds - 1; each writes exactly what a run with --num-seeds 1 and its seed writes
    all_seeds = [args.seed + k for k in range(args.num_seeds)]
    # EPPO: the variant and kappa are part of the run name
    run_names = {seed: (f"{args.env_id}__{args.experiment}__{args.strategy}__{args.exp_name}_{args.variant}"
                        f"_kappa{args.kappa}__{seed}") for seed in all_seeds}
    run_dirs = {seed: (args.run_dir or os.path.join("runs", run_names[seed])).replace("{seed}", str(seed))
                for seed in all_seeds}
    config_args = {seed: {**dataclasses.asdict(args), "seed": seed} for seed in all_seeds}
    try:
        for seed in all_seeds:
            prepare_run_dir(args, run_dirs[seed], config_args[seed])
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(EXIT_INVALID_CONFIG)
    seeds = []
    for seed in all_seeds:
        if os.path.exists(os.path.join(run_dirs[seed], "summary.json")):
            print(f"{run_dirs[seed]} already holds a finished run (summary.json); nothing to do.")
        else:
            seeds.append(seed)
    if not seeds:
        sys.exit(0)
    num_seeds = len(seeds)

    schedule = nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy)
    num_tasks = args.num_tasks or len(schedule)
    total_steps = args.steps_per_task * num_tasks
    batch_size = args.num_steps * args.num_envs
    num_iterations = math.ceil(total_steps / batch_size)

    torch.set_num_threads(args.torch_threads)
    if args.torch_deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
    # One CUDA process serves many seeds well and one seed badly (docs/batched-seeds.md): by default CUDA is used
    # from CUDA_MIN_SEEDS seeds up; an explicit --cuda forces it, --no-cuda forbids it.
    cuda_forced = "--cuda" in argv
    use_cuda = args.cuda and torch.cuda.is_available() and (cuda_forced or num_seeds >= CUDA_MIN_SEEDS)
    device = torch.device("cuda" if use_cuda else "cpu")
    # One generator per seed for the initial weights, the action noise and the minibatch permutations, so a
    # seed's random draws do not depend on the seeds beside it
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]

    # Environments: training envs seeded seed + i, evaluation envs seed + 100 + i (paper, Appendix B)
    envs = [[make_env(args, seed + i) for i in range(args.num_envs)] for seed in seeds]
    eval_envs = [[make_env(args, seed + 100 + i) for i in range(args.eval_episodes)] for seed in seeds]
    obs_dim = envs[0][0].observation_space.shape[0]
    action_dim = envs[0][0].action_space.shape[0]
    action_low, action_high = envs[0][0].action_space.low, envs[0][0].action_space.high

    actor = Actor(obs_dim, action_dim, args.hidden_dim, generators).to(device)
    # EPPO: the evidential critic, optionally started at the hyperpriors' modes (--evidence-init prior-mode)
    init_modes = None
    if args.evidence_init == "prior-mode":
        init_modes = tuple(gamma_mode(getattr(args, f"{name}_prior_shape"), getattr(args, f"{name}_prior_rate"))
                           for name in ("nu", "alpha", "beta"))
    critic = EvidentialCritic(obs_dim, args.hidden_dim, generators, args.evidence_transform, init_modes).to(device)
    # fused Adam per seed: one kernel over all of a seed's parameters, ~8% faster per minibatch on the CPU than
    # the default loop
    actor_optimizer = SeedwiseAdam(actor.parameters(), lr=args.learning_rate, eps=1e-5)
    critic_optimizer = SeedwiseAdam(critic.parameters(), lr=args.learning_rate, eps=1e-5)
    # EPPO: the hyperprior p(m) of the critic loss (paper Appendix B: N(0, 100^2), Gam(5, 1) for nu, alpha - 1, beta)
    hyperprior = dict(omega_loc=args.omega_prior_loc, omega_scale=args.omega_prior_scale, nu_shape=args.nu_prior_shape,
                      nu_rate=args.nu_prior_rate, alpha_shape=args.alpha_prior_shape, alpha_rate=args.alpha_prior_rate,
                      beta_shape=args.beta_prior_shape, beta_rate=args.beta_prior_rate)
    prior_weight = hyperprior_weight(args.xi, args.hyperprior_reduction, args.minibatch_size)  # EPPO
    obs_rms = RunningMeanStd(num_seeds, (obs_dim,))
    return_rms = RunningMeanStd(num_seeds, ())

    # Per-environment episode state, (seeds, envs) (kept here, not in wrappers, so that it can be checkpointed)
    discounted_return = np.zeros((num_seeds, args.num_envs))
    episode_return = np.zeros((num_seeds, args.num_envs))
    episode_length = np.zeros((num_seeds, args.num_envs), dtype=np.int64)
    global_step, iteration, task_index = 0, 0, 0
    nonfinite_skips_total, consecutive_nonfinite = np.zeros(num_seeds, np.int64), np.zeros(num_seeds, np.int64)
    timers = {"wall": 0.0, "eval": 0.0, "plasticity": 0.0}  # seconds, accumulated over resumed sessions
    saved_states = [[] for _ in seeds]
    saved_state_steps = [[] for _ in seeds]

    checkpoints = group_checkpoints([run_dirs[seed] for seed in seeds])
    unusable = [run_dirs[seed] for seed in seeds if not load_checkpoints(run_dirs[seed]) and any(
        os.path.exists(os.path.join(run_dirs[seed], name)) for name in ("checkpoint.pt", "checkpoint.prev.pt"))]
    if checkpoints is None and unusable and not args.overwrite:  # never discard what such a run logged
        print(f"error: --run-dir {', '.join(unusable)} holds checkpoints that cannot be resumed (unreadable, or "
              "written by another version of this script); pass --overwrite to start the run again",
              file=sys.stderr)
        sys.exit(EXIT_INVALID_CONFIG)
    if checkpoints is None:
        for seed in seeds:  # leftovers of an earlier attempt that never wrote a checkpoint
            for name in os.listdir(run_dirs[seed]):
                if name in ("evaluations.csv", "plasticity.csv", "states.npz") or name.startswith("events.out.tfevents"):
                    os.remove(os.path.join(run_dirs[seed], name))
        raw_obs = np.stack([[env.unwrapped.reset(seed=seed + i)[0] for i, env in enumerate(seed_envs)]
                            for seed, seed_envs in zip(seeds, envs)])
        obs_rms.update(raw_obs)
    else:
        checkpoint = stack_seeds([{key: value for key, value in state.items() if key not in ("args", "rng", "env_states")}
                                  for state in checkpoints])
        actor.load_state_dict(checkpoint["actor"])
        critic.load_state_dict(checkpoint["critic"])
        actor_optimizer.load_state_dict(checkpoint["actor_optimizer"])
        critic_optimizer.load_state_dict(checkpoint["critic_optimizer"])
        obs_rms.load_state_dict(checkpoint["obs_rms"])
        return_rms.load_state_dict(checkpoint["return_rms"])
        for seed_envs, state in zip(envs, checkpoints):
            for env, env_state in zip(seed_envs, state["env_states"]):
                nonstationary_envs.set_env_state(env, env_state)
        for generator, state in zip(generators, checkpoints):
            generator.set_state(state["rng"]["torch"])
        raw_obs = checkpoint["raw_obs"]
        discounted_return, episode_return, episode_length, nonfinite_skips_total = (
            checkpoint[k].copy() for k in ("discounted_return", "episode_return", "episode_length", "nonfinite_skips_total"))
        global_step, iteration, task_index = checkpoint["global_step"], checkpoint["iteration"], checkpoint["task_index"]
        timers = checkpoint["timers"]
        for k, seed in enumerate(seeds):
            for name in ("evaluations.csv", "plasticity.csv"):
                truncate_csv(os.path.join(run_dirs[seed], name), global_step)
            states_path = os.path.join(run_dirs[seed], "states.npz")
            if args.save_states and os.path.exists(states_path):
                with np.load(states_path) as saved:
                    keep = saved["global_steps"] <= global_step
                    saved_states[k], saved_state_steps[k] = [saved["observations"][keep]], [saved["global_steps"][keep]]
    for seed_envs in envs:
        for env in seed_envs:
            env.get_wrapper_attr("set_task")(task_index)

    for seed in seeds:
        with open(os.path.join(run_dirs[seed], "config.json"), "w") as f:
            json.dump({"args": config_args[seed], "script": os.path.basename(__file__), "method": method_name(args),
                       "run_name": run_names[seed], "num_tasks": num_tasks, "total_steps": total_steps,
                       "schedule": [str(p) for p in schedule[:num_tasks]], **run_metadata()}, f, indent=2)
    if args.track:  # one seed (validate_args)
        import wandb

        wandb_id_path = os.path.join(run_dirs[seeds[0]], "wandb_id.txt")
        if not os.path.exists(wandb_id_path):
            with open(wandb_id_path, "w") as f:
                f.write(wandb.util.generate_id())
        with open(wandb_id_path) as f:
            wandb_id = f.read().strip()
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, sync_tensorboard=True,
                   config=config_args[seeds[0]], name=run_names[seeds[0]], id=wandb_id, resume="allow",
                   dir=run_dirs[seeds[0]], group=f"{args.experiment}/{args.env_id}/{args.strategy}",
                   job_type=method_name(args))
    # purge_step drops TensorBoard points logged after the checkpoint, so a resumed run has no duplicates
    writers = [SummaryWriter(run_dirs[seed], purge_step=global_step if checkpoints else None) for seed in seeds]
    if checkpoints is None:
        for seed, writer in zip(seeds, writers):
            writer.add_text("hyperparameters",
                            "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in config_args[seed].items()))
    evaluation_header = ["global_step", "task", "episodes", "return_mean", "return_std", "return_min", "return_max"]
    evaluations_logs = [CsvLog(os.path.join(run_dirs[seed], "evaluations.csv"), evaluation_header) for seed in seeds]
    plasticity_logs = [CsvLog(os.path.join(run_dirs[seed], "plasticity.csv"),
                              ["global_step", "task", "network", "effective_rank", "stable_rank", "dormant_percent"])
                       for seed in seeds]
    # the last evaluation of each seed, shown on the progress bar (after a resume: the last row already logged)
    last_eval_return = np.full(num_seeds, np.nan)
    for k, seed in enumerate(seeds):
        last_eval_return[k] = last_logged_return(os.path.join(run_dirs[seed], "evaluations.csv"))

    print(f"{method_name(args)} on {args.env_id} {args.experiment}"
          f"{'' if args.experiment == 'none' else '/' + args.strategy}: {num_tasks} task(s) x "
          f"{args.steps_per_task} steps, seed{'s' if num_seeds > 1 else ''} {', '.join(map(str, seeds))} on {device}"
          f"{'' if device.type == 'cuda' or not torch.cuda.is_available() else ' (CUDA from --num-seeds ' + str(CUDA_MIN_SEEDS) + ' or with --cuda)'}")
    describer = eval_envs[0][0]  # an evaluation env: its task is set again before every evaluation
    descriptions = []
    for i in range(num_tasks):
        describer.get_wrapper_attr("set_task")(i)
        descriptions.append(describer.get_wrapper_attr("task_description")())
    print(f"  task schedule: {'; '.join(descriptions)}")
    print(f"  kappa {args.kappa:g} ({kappa_source})")  # EPPO: which UCB radius this run uses
    for seed in seeds:
        print(f"  writes {run_dirs[seed]}")
    if checkpoints:
        for seed in seeds:
            print(f"resuming {run_dirs[seed]} from global_step {global_step} (task {task_index})")

    # SIGTERM (SLURM preemption) and SIGINT (Ctrl-C) stop the run at the next update boundary with a checkpoint
    stop_signal = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda received, frame: stop_signal.append(received))

    def evaluate(step: int) -> None:
        """The paper's protocol: deterministic actions, frozen normalization, envs on the evaluated task."""
        eval_start = time.perf_counter()
        task = evaluated_task(step, args.steps_per_task)
        measure_plasticity = step == 0 or step % args.steps_per_task == 0
        returns, lengths, visited = evaluate_policy(actor, eval_envs, task, obs_rms, args, seeds, device,
                                                    args.plasticity_states if measure_plasticity else 0, env_pool)
        for k in range(num_seeds):
            evaluations_logs[k].write([step, task, returns.shape[1], returns[k].mean(), returns[k].std(),
                                       returns[k].min(), returns[k].max()])
            writers[k].add_scalar("eval/episodic_return", returns[k].mean(), step)
            writers[k].add_scalar("eval/episodic_length", lengths[k].mean(), step)
        timers["eval"] += time.perf_counter() - eval_start
        last_eval_return[:] = returns.mean(axis=1)
        if num_seeds == 1:
            message = f"eval step={step} task={task} return={returns.mean():.1f} +- {returns.std():.1f}"
        else:
            message = (f"eval step={step} task={task} return per seed: "
                       + ", ".join(f"{seed}: {value:.0f}" for seed, value in zip(seeds, last_eval_return)))
        (progress.write if progress else print)(message)
        if measure_plasticity:
            plasticity_start = time.perf_counter()
            with torch.inference_mode():
                for network_name, network in (("critic", critic), ("actor", actor)):
                    for k in range(num_seeds):  # per seed: its own states through its own network
                        activations = single_seed_network(network, k).hidden_activations(
                            torch.from_numpy(visited[k]).to(device)[None])
                        activations = [layer[0] for layer in activations]
                        metrics = {"effective_rank": plasticity_metrics.effective_rank(activations[-1]),
                                   "stable_rank": plasticity_metrics.stable_rank(activations[-1]),
                                   "dormant_percent": plasticity_metrics.dormant_unit_percentage(activations)}
                        for key, value in metrics.items():
                            writers[k].add_scalar(f"plasticity/{network_name}_{key}", value, step)
                        plasticity_logs[k].write([step, task, network_name, *metrics.values()])
            timers["plasticity"] += time.perf_counter() - plasticity_start

    def write_checkpoint() -> None:
        """Each seed's own checkpoint.pt in its run directory, in the format of a one-seed run."""
        stacked = {
            "actor": actor.state_dict(), "critic": critic.state_dict(),
            "actor_optimizer": actor_optimizer.state_dict(), "critic_optimizer": critic_optimizer.state_dict(),
            "obs_rms": obs_rms.state_dict(), "return_rms": return_rms.state_dict(), "raw_obs": raw_obs,
            "discounted_return": discounted_return, "episode_return": episode_return, "episode_length": episode_length,
            "nonfinite_skips_total": nonfinite_skips_total,
        }
        for k, seed in enumerate(seeds):
            state = {"format": CHECKPOINT_FORMAT, "args": config_args[seed], "global_step": global_step,
                     "iteration": iteration, "task_index": task_index, "timers": dict(timers),
                     **seed_slice(stacked, k),
                     "env_states": [nonstationary_envs.get_env_state(env) for env in envs[k]],
                     "rng": {"torch": generators[k].get_state()}}
            save_checkpoint(run_dirs[seed], state)
            if args.save_states and saved_states[k]:
                observations, steps = np.concatenate(saved_states[k]), np.concatenate(saved_state_steps[k])
                saved_states[k], saved_state_steps[k] = [observations], [steps]
                atomic_write_bytes(os.path.join(run_dirs[seed], "states.npz"),
                                   lambda f: np.savez_compressed(f, observations=observations, global_steps=steps))

    # Rollout buffers live on the CPU during the rollout (one copy to the device per update), (seeds, T, envs, ...)
    obs_buffer = np.zeros((num_seeds, args.num_steps, args.num_envs, obs_dim), np.float32)
    next_obs_buffer = np.zeros((num_seeds, args.num_steps, args.num_envs, obs_dim), np.float32)
    actions_buffer = np.zeros((num_seeds, args.num_steps, args.num_envs, action_dim), np.float32)
    rewards_buffer = np.zeros((num_seeds, args.num_steps, args.num_envs), np.float32)
    terminations_buffer = np.zeros((num_seeds, args.num_steps, args.num_envs), np.float32)
    dones_buffer = np.zeros((num_seeds, args.num_steps, args.num_envs), np.float32)
    env_index = [(k, i, env) for k, seed_envs in enumerate(envs) for i, env in enumerate(seed_envs)]
    env_pool = ThreadPoolExecutor(args.env_threads) if args.env_threads > 1 else None
    seed_rows = torch.arange(num_seeds, device=device)[:, None]  # gathers each seed's own minibatch

    eval_points = [s for s in evaluation_steps(args.steps_per_task, num_tasks, args.eval_frequency) if s > global_step]
    progress = None
    session_start, session_start_step = time.perf_counter(), global_step
    session_timers_start = dict(timers)
    wall_mark = session_start
    if checkpoints is None:
        evaluate(0)
    progress = tqdm(total=total_steps, initial=global_step, unit="step", dynamic_ncols=True, disable=None)
    obs = obs_rms.normalize(raw_obs, args.normalization_clip)
    final_raw_obs = {}  # (seed, env) index -> final observation of an episode that ended in this step
    next_checkpoint = global_step + args.checkpoint_frequency if args.checkpoint_frequency else math.inf
    exit_code = 0

    while global_step < total_steps:
        iteration += 1
        if args.anneal_lr:
            for optimizer in (actor_optimizer, critic_optimizer):
                optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / num_iterations)

        # ---- Rollout ----
        action_std = torch.exp(actor.log_std.detach())
        # each seed's action noise for the whole rollout, from its own generator: (T, seeds, envs, action_dim)
        action_noise = torch.stack([torch.randn((args.num_steps, args.num_envs, action_dim), generator=generator)
                                    for generator in generators], dim=1).to(device)
        task_ended = False
        steps_collected = 0
        # one inference-mode context for the whole rollout: entering it per step costs ~20 us
        with torch.inference_mode():
            for step in range(args.num_steps):
                step_task = global_step // args.steps_per_task
                if step_task != task_index:
                    task_index = step_task
                    for _, _, env in env_index:
                        env.get_wrapper_attr("set_task")(task_index)
                    for writer in writers:
                        writer.add_scalar("task/index", task_index, global_step)
                    progress.write(f"step {global_step}: task {task_index} "
                                   f"({envs[0][0].get_wrapper_attr('task_description')()})")
                obs_buffer[:, step] = obs
                mean = actor(torch.from_numpy(obs).to(device))
                action = (mean + action_std * action_noise[step]).cpu().numpy()
                actions_buffer[:, step] = action
                clipped_action = np.minimum(np.maximum(action, action_low), action_high)  # np.clip's wrapper costs ~10 us
                global_step += args.num_envs
                for (k, i, env), (next_raw_obs, reward, terminated, _, _) in zip(
                        env_index, step_envs(env_index, clipped_action, env_pool, args.env_threads)):
                    episode_return[k, i] += reward
                    episode_length[k, i] += 1
                    # gymnasium's NormalizeReward: scale by the std of the discounted return, reset only on termination
                    discounted_return[k, i] = discounted_return[k, i] * args.gamma * (1.0 - terminated) + reward
                    rewards_buffer[k, step, i] = reward
                    terminations_buffer[k, step, i] = terminated
                    done = terminated or episode_length[k, i] >= args.max_episode_steps
                    dones_buffer[k, step, i] = done
                    raw_obs[k, i] = next_raw_obs
                    if done:
                        # The env restarts in the same step, so the buffer holds no junk transition; the true final
                        # observation is kept for next_obs_buffer (a truncation bootstraps from its value).
                        final_raw_obs[k, i] = next_raw_obs
                        writers[k].add_scalar("charts/episodic_return", episode_return[k, i], global_step)
                        writers[k].add_scalar("charts/episodic_length", episode_length[k, i], global_step)
                        episode_return[k, i], episode_length[k, i] = 0.0, 0
                        raw_obs[k, i] = env.unwrapped.reset()[0]
                return_rms.update(discounted_return)
                if args.norm_reward:
                    scaled_reward = rewards_buffer[:, step] / np.sqrt(return_rms.var + 1e-8)
                    rewards_buffer[:, step] = np.minimum(np.maximum(scaled_reward, -args.normalization_clip),
                                                         args.normalization_clip)
                obs_rms.update(raw_obs)
                obs = obs_rms.normalize(raw_obs, args.normalization_clip)
                next_obs_buffer[:, step] = obs
                for (k, i), final in final_raw_obs.items():
                    next_obs_buffer[k, step, i] = obs_rms.normalize(final, args.normalization_clip)[k, 0]
                final_raw_obs.clear()
                if args.save_states and (global_step // args.num_envs) % args.save_states_every == 0:
                    for k in range(num_seeds):
                        saved_states[k].append(raw_obs[k].astype(np.float16))
                        saved_state_steps[k].append(np.full(args.num_envs, global_step))
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
        b_obs = torch.from_numpy(obs_buffer).to(device).reshape(num_seeds, batch_size, obs_dim)
        b_actions = torch.from_numpy(actions_buffer).to(device).reshape(num_seeds, batch_size, action_dim)
        rollout_shape = (num_seeds, args.num_steps, args.num_envs)
        with torch.no_grad():
            # EPPO: E[V] = omega and var[V] at s_t and at the true next states (Algorithm 1, lines 5-6)
            values, nu, alpha, beta = (output.reshape(rollout_shape) for output in critic(b_obs))
            aleatoric_vars, epistemic_vars = nig_variance_split(nu, alpha, beta)
            value_vars = aleatoric_vars + epistemic_vars
            next_values, next_nu, next_alpha, next_beta = critic(
                torch.from_numpy(next_obs_buffer).to(device).reshape(num_seeds, batch_size, obs_dim))
            next_value_vars = nig_value_variance(next_nu, next_alpha, next_beta)
            old_log_probs = gaussian_log_prob(b_actions, actor(b_obs), actor.log_std)
            # gae runs over time first: (T, seeds, envs) views of the (seeds, T, envs) buffers
            time_major = [torch.from_numpy(buffer).to(device).transpose(0, 1)
                          for buffer in (rewards_buffer, terminations_buffer, dones_buffer)]
            rewards, terminations, dones = time_major
            # EPPO: GAE's mean and variance (Eq. gae_var / gae_var_ind), then the UCB advantage (Eq. ucb)
            advantages, advantage_vars = (output.transpose(0, 1) for output in probabilistic_gae(
                rewards, values.transpose(0, 1), value_vars.transpose(0, 1),
                next_values.reshape(rollout_shape).transpose(0, 1),
                next_value_vars.reshape(rollout_shape).transpose(0, 1), terminations, dones, args.gamma,
                args.gae_lambda, args.variant))
            advantage_stds = advantage_vars.sqrt()
            advantages, returns = ucb_advantages_and_returns(advantages, advantage_stds, values, args.kappa,
                                                             args.ucb_in_returns)
            # EPPO: each seed's rollout means of the evidence, logged under evidential/ (kept on the device)
            scales = student_t_scale(nu, alpha, beta)
            evidential_stats = torch.stack(
                [values, aleatoric_vars, epistemic_vars, advantage_stds, args.kappa * advantage_stds, alpha, nu, beta,
                 scales, ((returns - values).abs() > 2.0 * scales).float(),
                 nll_error_rescaling(returns - values, nu, alpha, beta)], dim=1).flatten(2).mean(-1)  # (seeds, 11)

        # ---- Update ----
        b_advantages = advantages.reshape(num_seeds, batch_size)
        b_returns, b_values = returns.reshape(num_seeds, batch_size), values.reshape(num_seeds, batch_size)
        if args.norm_adv:  # Algorithm 1, line 19: normalized over each seed's whole batch, once, after the returns
            b_advantages = normalize_advantages(b_advantages)
        # policy, value, entropy, old approx kl, approx kl, EPPO: + nll, hyperprior
        loss_sums = torch.zeros(num_seeds, 7, device=device)
        clipfrac_sum = torch.zeros(num_seeds, device=device)
        critic_max_grad = torch.zeros(num_seeds, device=device)
        # EPPO: critic grad norm, head shares (omega, nu, alpha, beta)
        critic_grad_sums = torch.zeros(num_seeds, 5, device=device)
        minibatch_steps, skipped_this_update = np.zeros(num_seeds, np.int64), np.zeros(num_seeds, np.int64)
        skip_reasons = [set() for _ in seeds]
        for epoch in range(args.update_epochs):
            permutation = torch.stack([torch.randperm(batch_size, generator=generator)
                                       for generator in generators]).to(device)
            for start in range(0, batch_size, args.minibatch_size):
                mb = permutation[:, start : start + args.minibatch_size]  # (seeds, minibatch): each seed's own
                new_log_probs = gaussian_log_prob(b_actions[seed_rows, mb], actor(b_obs[seed_rows, mb]), actor.log_std)
                log_ratio = new_log_probs - old_log_probs[seed_rows, mb]
                ratio = log_ratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-log_ratio).mean(-1)
                    approx_kl = ((ratio - 1) - log_ratio).mean(-1)
                    clipfrac_sum += ((ratio - 1.0).abs() > args.clip_coef).float().mean(-1)
                mb_advantages = b_advantages[seed_rows, mb]
                pg_loss = torch.max(-mb_advantages * ratio,
                                    -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean(-1)
                entropy = gaussian_entropy(actor.log_std).squeeze(-1)
                actor_loss = pg_loss - args.ent_coef * entropy

                mb_returns = b_returns[seed_rows, mb]
                # EPPO: L = NLL - xi * log p(m) on the targets R (Eq. loss_nll, Sec. 3.1; --clip-vloss is rejected);
                # --critic-loss mse: PPO's (omega - R)^2 instead
                v_loss, nll_loss, hyperprior_loss = evidential_critic_loss(
                    mb_returns, *critic(b_obs[seed_rows, mb]), args.critic_loss, prior_weight, **hyperprior)
                critic_loss = v_loss

                actor_optimizer.zero_grad()
                critic_optimizer.zero_grad()
                # disjoint parameters: one backward serves both; summed over seeds, so each seed's gradient is
                # the gradient of its own loss
                (actor_loss + critic_loss).sum().backward()
                critic_grad_max = critic_optimizer.max_abs_gradients()
                actor_grad_norm = actor_optimizer.clip_grad_norms_(args.max_grad_norm)
                critic_grad_norm = critic_optimizer.clip_grad_norms_(args.max_grad_norm)
                # One host sync per minibatch: a seed whose loss or gradient is not finite skips its step
                finite = torch.stack([actor_loss, critic_loss, actor_grad_norm, critic_grad_norm]).isfinite().cpu().numpy()
                seed_finite = finite.all(axis=0)
                if not seed_finite.all():
                    names = np.array(["actor_loss", "critic_loss", "actor_grad", "critic_grad"])
                    for k in np.flatnonzero(~seed_finite):
                        skip_reasons[k].update(names[~finite[:, k]])
                    skipped_this_update += ~seed_finite
                    consecutive_nonfinite = np.where(seed_finite, 0, consecutive_nonfinite + 1)
                    if consecutive_nonfinite.max() >= args.max_nonfinite_skips:
                        break
                    actor_optimizer.step(seed_finite)
                    critic_optimizer.step(seed_finite)
                else:
                    consecutive_nonfinite[:] = 0
                    actor_optimizer.step()
                    critic_optimizer.step()
                finite_mask = torch.from_numpy(seed_finite).to(device)
                minibatch_steps += seed_finite
                critic_max_grad = torch.where(finite_mask, torch.maximum(critic_max_grad, critic_grad_max), critic_max_grad)
                loss_sums += torch.where(finite_mask[:, None], torch.stack(  # EPPO: + nll, hyperprior
                    [pg_loss, v_loss, entropy, old_approx_kl, approx_kl, nll_loss, hyperprior_loss], dim=1).detach(), 0.0)
                # EPPO: the critic's gradient norm before clipping and the head rows' shares of it, summed on device
                critic_grad_sums += torch.where(finite_mask[:, None], torch.cat([critic_grad_norm[:, None],
                    head_gradient_shares(critic.head.weight.grad, critic.head.bias.grad[:, 0])], dim=1).detach(), 0.0)
            if consecutive_nonfinite.max() >= args.max_nonfinite_skips:
                break
            if args.target_kl is not None and approx_kl.item() > args.target_kl:  # one seed (validate_args)
                break

        # ---- Logging ----
        now = time.perf_counter()
        timers["wall"] += now - wall_mark
        wall_mark = now
        session_time = now - session_start
        session_overhead = sum(timers[k] - session_timers_start[k] for k in ("eval", "plasticity"))
        group_sps = num_seeds * (global_step - session_start_step) / max(session_time - session_overhead, 1e-9)
        steps_taken = torch.from_numpy(np.maximum(minibatch_steps, 1)).to(device)  # per seed (skips excluded)
        loss_means = (loss_sums / steps_taken[:, None]).tolist()
        clipfracs = (clipfrac_sum / steps_taken).tolist()
        critic_max_grads = critic_max_grad.tolist()
        # EPPO: the evidence and the critic's gradient means of every seed, in one host sync
        evidential_means = torch.cat([evidential_stats, critic_grad_sums / steps_taken[:, None]], dim=1).tolist()
        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        for k, writer in enumerate(writers):
            if skipped_this_update[k]:
                nonfinite_skips_total[k] += skipped_this_update[k]
                warnings.warn(f"seed {seeds[k]}, step {global_step}: skipped {skipped_this_update[k]} minibatch step(s) "
                              f"with non-finite {', '.join(sorted(skip_reasons[k]))}")
            writer.add_scalar("charts/nonfinite_skips", nonfinite_skips_total[k], global_step)
            if minibatch_steps[k]:
                pg_mean, v_mean, entropy_mean, old_kl_mean, kl_mean, nll_mean, hyperprior_mean = loss_means[k]  # EPPO
                var_y = np.var(y_true[k])
                writer.add_scalar("charts/learning_rate", actor_optimizer.param_groups[0]["lr"], global_step)
                writer.add_scalar("losses/value_loss", v_mean, global_step)
                writer.add_scalar("losses/policy_loss", pg_mean, global_step)
                writer.add_scalar("losses/entropy", entropy_mean, global_step)
                writer.add_scalar("losses/old_approx_kl", old_kl_mean, global_step)
                writer.add_scalar("losses/approx_kl", kl_mean, global_step)
                writer.add_scalar("losses/clipfrac", clipfracs[k], global_step)
                writer.add_scalar("losses/explained_variance",
                                  np.nan if var_y == 0 else 1 - np.var(y_true[k] - y_pred[k]) / var_y, global_step)
                writer.add_scalar("plasticity/critic_max_abs_grad", critic_max_grads[k], global_step)
                # EPPO: the critic's loss terms, its evidence on the rollout that the update used and its gradient
                writer.add_scalar("losses/nll", nll_mean, global_step)
                writer.add_scalar("losses/hyperprior", hyperprior_mean, global_step)
                for tag, value in zip(("omega", "aleatoric_variance", "epistemic_variance", "advantage_std", "ucb_bonus",
                                       "alpha", "nu", "beta", "student_t_scale", "targets_outside_2_scales", "zeta",
                                       "critic_grad_norm", "grad_share_omega", "grad_share_nu", "grad_share_alpha",
                                       "grad_share_beta"), evidential_means[k]):
                    writer.add_scalar(f"evidential/{tag}", value, global_step)
            writer.add_scalar("charts/SPS", group_sps / num_seeds, global_step)  # this seed's own steps/s
        progress.set_postfix(task=task_index, sps=f"{group_sps:.0f}", eval=f"{np.nanmean(last_eval_return):.0f}",
                             refresh=False)

        # ---- Checkpoint ----
        if consecutive_nonfinite.max() >= args.max_nonfinite_skips:
            write_checkpoint()
            failed = [seeds[k] for k in np.flatnonzero(consecutive_nonfinite >= args.max_nonfinite_skips)]
            reasons = sorted(set().union(*(skip_reasons[seeds.index(seed)] for seed in failed)))
            print(f"error: seed {', '.join(map(str, failed))}: {args.max_nonfinite_skips} consecutive minibatch steps "
                  f"had a non-finite loss or gradient ({', '.join(reasons)}) at step {global_step}; stopped with a "
                  "checkpoint of the last finite state. Lower the learning rate or inspect the run before resuming.",
                  file=sys.stderr)
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
    if env_pool is not None:
        env_pool.shutdown()
    timers["wall"] += time.perf_counter() - wall_mark
    train_time = timers["wall"] - timers["eval"] - timers["plasticity"]
    if exit_code == 0:
        write_checkpoint()  # the final networks and normalization statistics, for scripts/evaluate.py
        for k, seed in enumerate(seeds):
            summary = {"status": "finished", "global_step": global_step,
                       "train_sps": global_step / max(train_time, 1e-9), "wall_time_s": timers["wall"],
                       "train_time_s": train_time, "eval_time_s": timers["eval"],
                       "plasticity_time_s": timers["plasticity"], "nonfinite_skips": int(nonfinite_skips_total[k]),
                       "num_seeds": num_seeds, "group_train_sps": num_seeds * global_step / max(train_time, 1e-9),
                       "device": device.type}
            with open(os.path.join(run_dirs[seed], "summary.json"), "w") as f:
                json.dump(summary, f, indent=2)
        print(f"finished {', '.join(run_dirs[seed] for seed in seeds)}: {global_step} steps per seed, train SPS "
              f"{summary['group_train_sps']:.0f} ({summary['train_sps']:.0f} per seed), eval {timers['eval']:.1f} s")
    for log in evaluations_logs + plasticity_logs:
        log.close()
    for writer in writers:
        writer.close()
    if args.track:
        wandb.finish()
    sys.exit(exit_code)
