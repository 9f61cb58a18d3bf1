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

TensorBoard tags under ``evidential/``, one point per update (means over the rollout the update used, or over the
update's minibatch steps where noted):
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
import torch.nn.functional as F
import torch.optim as optim

import nonstationary_envs
import plasticity_metrics

EXIT_INVALID_CONFIG = 2
EXIT_NONFINITE = 3
EXIT_PREEMPTED = 75
CHECKPOINT_FORMAT = 1
# Args that may change between a run and its resumption without changing the experiment.
RESUME_IGNORED_ARGS = ("overwrite", "cuda", "track", "wandb_project_name", "wandb_entity", "max_nonfinite_skips")
# EPPO: the advantage-variance variants of Algorithm 1.
GAE_VARIANTS = ("mean", "cor", "ind")
# EPPO: softplus can underflow to exactly 0 in float32, and 1 + softplus(h) rounds to exactly 1 whenever
# softplus(h) < 2**-24 (half an ulp of 1). The floors keep nu, beta > 0 and alpha - 1 > 0 representable:
# 1e-6 is about 8 ulp of 1.0 in float32 (eps 1.19e-7), so alpha = 1 + 1e-6 stays distinct from 1, while it is
# far below any value the Gam(5, 1) hyperpriors (mean 5) favour, so it never shapes a trained critic.
EVIDENCE_FLOOR = 1e-6
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

    # EPPO: evidential critic and optimistic advantages (paper Sec. 3, Appendix B)
    variant: Literal["mean", "cor", "ind"] = "ind"
    """advantage variance: mean (no bonus, EPPO_mean), cor (Eq. gae_var, EPPO_cor), ind (Eq. gae_var_ind, EPPO_ind)"""
    kappa: float = 0.1
    """confidence radius of the UCB advantage A + kappa * sqrt(var[A]) (Eq. ucb); must be 0 with --variant mean"""
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
    """EPPO: PPO's critic trunk with a 4-output head for the NIG parameters (omega, nu, alpha, beta) (Sec. 3.1).

    ``init_modes`` = (nu, alpha - 1, beta) starts the evidence at these values (--evidence-init prior-mode): the
    head's bias rows map to them and their weight rows are scaled by PRIOR_MODE_WEIGHT_SCALE (no extra random draws).
    """

    def __init__(self, obs_dim: int, hidden_dim: int, transform: str = "softplus", init_modes: Optional[tuple] = None):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, hidden_dim)
        self.head = layer_init(nn.Linear(hidden_dim, 4), std=1.0)
        self.transform = transform
        if init_modes is not None:
            with torch.no_grad():
                self.head.weight[1:] *= PRIOR_MODE_WEIGHT_SCALE
                for row, mode in enumerate(init_modes, start=1):
                    self.head.bias[row] = inverse_evidence_transform(mode - EVIDENCE_FLOOR, transform)

    def forward(self, x: torch.Tensor) -> tuple:
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
    """Diagonal Gaussian policy with a state-independent log standard deviation."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_dim: int):
        super().__init__()
        self.trunk = mlp_trunk(obs_dim, hidden_dim)
        self.mean_head = layer_init(nn.Linear(hidden_dim, action_dim), std=0.01)
        self.log_std = nn.Parameter(torch.zeros(action_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mean_head(self.trunk(x))

    features = EvidentialCritic.features
    hidden_activations = EvidentialCritic.hidden_activations


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
    """EPPO: (loss, mean NLL, mean -log p(m)) of a minibatch of targets y.

    nll: L = mean NLL + prior_weight * mean(-log p(m)) (Eq. loss_nll, Sec. 3.1, Algorithm 1). mse (--critic-loss
    mse, the control): L = mean (omega - y)^2, PPO's value loss (Algorithm 1), so nu, alpha, beta get no gradient;
    the NLL and the hyperprior are still returned for logging.
    """
    nll = nig_nll(y, omega, nu, alpha, beta).mean()
    negative_log_prior = -nig_log_hyperprior(omega, nu, alpha, beta, **hyperprior).mean()
    if critic_loss == "nll":
        return nll + prior_weight * negative_log_prior, nll, negative_log_prior
    if critic_loss == "mse":
        return (omega - y).square().mean(), nll.detach(), negative_log_prior.detach()
    raise ValueError(f"unknown critic loss {critic_loss!r}; valid choices: {', '.join(CRITIC_LOSSES)}")


def head_gradient_shares(weight_grad: torch.Tensor, bias_grad: torch.Tensor) -> torch.Tensor:
    """EPPO: each output row's share of the squared gradient norm of a linear head (weight and bias rows together).

    For the evidential head the rows are (omega, nu, alpha, beta): the shares say which term of the critic loss
    drives the update. Row k's gradient is sum_i g_ik (h_i, 1) for the pre-activation gradients g, so it is 0 exactly
    when output k gets no gradient. Shares sum to 1 (all 0 for a zero gradient).
    """
    squared = weight_grad.square().sum(-1) + bias_grad.square()
    return squared / squared.sum().clamp_min(torch.finfo(squared.dtype).tiny)


def probabilistic_gae(rewards, values, value_vars, next_values, next_value_vars, terminations, dones,
                      gamma: float, gae_lambda: float, variant: str) -> tuple:
    """EPPO: mean and variance of generalized advantage estimation over a (T, N) rollout (Algorithm 1, lines 7-17).

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
    advantages, future_value_vars = [], []
    last_advantage = torch.zeros_like(rewards[0])
    last_future_var = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):  # one fused kernel per recursion and step (addcmul: a + b * c)
        last_advantage = torch.addcmul(deltas[t], continues[t], last_advantage)
        last_future_var = torch.addcmul(next_value_var_terms[t], var_continues[t], last_future_var)
        advantages.append(last_advantage)
        future_value_vars.append(last_future_var)
    advantages = torch.stack(advantages[::-1])
    if variant == "mean":
        return advantages, torch.zeros_like(advantages)
    future_value_vars = torch.stack(future_value_vars[::-1])
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
    # EPPO: the evidential critic's and the UCB's settings
    if not (math.isfinite(args.kappa) and args.kappa >= 0):
        raise ValueError(f"--kappa must be a finite number >= 0 (the UCB radius of Eq. ucb), got {args.kappa}")
    if args.variant == "mean" and args.kappa != 0:
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
    # EPPO: the variant and kappa are part of the run name
    run_name = (f"{args.env_id}__{args.experiment}__{args.strategy}__{args.exp_name}_{args.variant}_kappa{args.kappa}"
                f"__{args.seed}")
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
    # EPPO: the evidential critic, optionally started at the hyperpriors' modes (--evidence-init prior-mode)
    init_modes = None
    if args.evidence_init == "prior-mode":
        init_modes = tuple(gamma_mode(getattr(args, f"{name}_prior_shape"), getattr(args, f"{name}_prior_rate"))
                           for name in ("nu", "alpha", "beta"))
    critic = EvidentialCritic(obs_dim, args.hidden_dim, args.evidence_transform, init_modes).to(device)
    # fused Adam: one kernel over all parameters, ~8% faster per minibatch on the CPU than the default loop
    actor_optimizer = optim.Adam(actor.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    critic_optimizer = optim.Adam(critic.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    # EPPO: the hyperprior p(m) of the critic loss (paper Appendix B: N(0, 100^2), Gam(5, 1) for nu, alpha - 1, beta)
    hyperprior = dict(omega_loc=args.omega_prior_loc, omega_scale=args.omega_prior_scale, nu_shape=args.nu_prior_shape,
                      nu_rate=args.nu_prior_rate, alpha_shape=args.alpha_prior_shape, alpha_rate=args.alpha_prior_rate,
                      beta_shape=args.beta_prior_shape, beta_rate=args.beta_prior_rate)
    prior_weight = hyperprior_weight(args.xi, args.hyperprior_reduction, args.minibatch_size)  # EPPO
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
            # EPPO: E[V] = omega and var[V] at s_t and at the true next states (Algorithm 1, lines 5-6)
            values, nu, alpha, beta = critic(b_obs)
            aleatoric_vars, epistemic_vars = nig_variance_split(nu, alpha, beta)
            value_vars = aleatoric_vars + epistemic_vars
            next_values, next_nu, next_alpha, next_beta = critic(torch.from_numpy(next_obs_buffer).to(device))
            next_value_vars = nig_value_variance(next_nu, next_alpha, next_beta)
            old_log_probs = gaussian_log_prob(b_actions, actor(b_obs), actor.log_std)
            # EPPO: GAE's mean and variance (Eq. gae_var / gae_var_ind), then the UCB advantage (Eq. ucb)
            advantages, advantage_vars = probabilistic_gae(
                torch.from_numpy(rewards_buffer).to(device), values, value_vars, next_values, next_value_vars,
                torch.from_numpy(terminations_buffer).to(device), torch.from_numpy(dones_buffer).to(device),
                args.gamma, args.gae_lambda, args.variant)
            advantage_stds = advantage_vars.sqrt()
            advantages, returns = ucb_advantages_and_returns(advantages, advantage_stds, values, args.kappa,
                                                             args.ucb_in_returns)
            # EPPO: rollout means of the evidence, logged under evidential/ (one host sync)
            scales = student_t_scale(nu, alpha, beta)
            evidential_stats = dict(zip(
                ("omega", "aleatoric_variance", "epistemic_variance", "advantage_std", "ucb_bonus", "alpha", "nu", "beta",
                 "student_t_scale", "targets_outside_2_scales", "zeta"),
                torch.stack([values.mean(), aleatoric_vars.mean(), epistemic_vars.mean(), advantage_stds.mean(),
                             args.kappa * advantage_stds.mean(), alpha.mean(), nu.mean(), beta.mean(), scales.mean(),
                             ((returns - values).abs() > 2.0 * scales).float().mean(),
                             nll_error_rescaling(returns - values, nu, alpha, beta).mean()]).tolist()))

        # ---- Update ----
        b_obs = b_obs.reshape(batch_size, obs_dim)
        b_actions = b_actions.reshape(batch_size, action_dim)
        b_old_log_probs, b_advantages = old_log_probs.reshape(-1), advantages.reshape(-1)
        b_returns, b_values = returns.reshape(-1), values.reshape(-1)
        if args.norm_adv:  # Algorithm 1, line 19: normalized over the whole batch, once, after the returns
            b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)
        # policy, value, entropy, old approx kl, approx kl, EPPO: + nll, hyperprior
        loss_sums = torch.zeros(7, device=device)
        clipfrac_sum = torch.zeros((), device=device)
        critic_max_grad = 0.0
        critic_grad_sums = torch.zeros(5, device=device)  # EPPO: critic grad norm, head shares (omega, nu, alpha, beta)
        minibatch_steps, skipped_this_update, skip_reasons = 0, 0, set()
        for epoch in range(args.update_epochs):
            permutation = torch.randperm(batch_size, device=device)
            for start in range(0, batch_size, args.minibatch_size):
                mb = permutation[start : start + args.minibatch_size]
                new_log_probs = gaussian_log_prob(b_actions[mb], actor(b_obs[mb]), actor.log_std)
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
                actor_loss = pg_loss - args.ent_coef * entropy

                # EPPO: L = NLL - xi * log p(m) on the targets R (Eq. loss_nll, Sec. 3.1; --clip-vloss is rejected);
                # --critic-loss mse: PPO's (omega - R)^2 instead
                v_loss, nll_loss, hyperprior_loss = evidential_critic_loss(
                    b_returns[mb], *critic(b_obs[mb]), args.critic_loss, prior_weight, **hyperprior)
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
                # EPPO: the critic's gradient norm before clipping and the head rows' shares of it, summed on device
                critic_grad_sums += torch.cat([critic_grad_norm.reshape(1), head_gradient_shares(
                    critic.head.weight.grad, critic.head.bias.grad)]).detach()
                loss_sums += torch.stack([pg_loss, v_loss, entropy, old_approx_kl, approx_kl, nll_loss,
                                          hyperprior_loss]).detach()  # EPPO: + nll, hyperprior
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
            pg_mean, v_mean, entropy_mean, old_kl_mean, kl_mean, nll_mean, hyperprior_mean = (
                loss_sums / minibatch_steps).tolist()  # EPPO: + nll, hyperprior
            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            writer.add_scalar("charts/learning_rate", actor_optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/value_loss", v_mean, global_step)
            writer.add_scalar("losses/policy_loss", pg_mean, global_step)
            writer.add_scalar("losses/entropy", entropy_mean, global_step)
            writer.add_scalar("losses/old_approx_kl", old_kl_mean, global_step)
            writer.add_scalar("losses/approx_kl", kl_mean, global_step)
            writer.add_scalar("losses/clipfrac", clipfrac_sum.item() / minibatch_steps, global_step)
            writer.add_scalar("losses/explained_variance", np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y,
                              global_step)
            writer.add_scalar("plasticity/critic_max_abs_grad", critic_max_grad, global_step)
            # EPPO: the critic's loss terms and its evidence on the rollout that the update used
            writer.add_scalar("losses/nll", nll_mean, global_step)
            writer.add_scalar("losses/hyperprior", hyperprior_mean, global_step)
            for tag, value in evidential_stats.items():
                writer.add_scalar(f"evidential/{tag}", value, global_step)
            critic_grad_means = (critic_grad_sums / minibatch_steps).tolist()  # EPPO: the critic's gradient
            for tag, value in zip(("critic_grad_norm", "grad_share_omega", "grad_share_nu", "grad_share_alpha",
                                   "grad_share_beta"), critic_grad_means):
                writer.add_scalar(f"evidential/{tag}", value, global_step)
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
