"""Evidential Proximal Policy Optimization (EPPO) for continuous control.

EPPO replaces PPO's point-estimate critic with an evidential critic that outputs the
Normal-Inverse-Gamma parameters (omega, nu, alpha, beta) of the value (paper Sec. 3.1),
trains it on the Student-t marginal likelihood plus hyperpriors, propagates the value
variance through GAE (Eq. gae_var / gae_var_ind) and adds an upper-confidence bonus to
the advantages (Eq. ucb). Variants: EPPO_mean (no bonus), EPPO_cor, EPPO_ind.
"""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

GAE_VARIANTS = ("mean", "cor", "ind")

# Softplus can underflow to exactly 0 in float32, and 1 + softplus(h) rounds to exactly 1
# whenever softplus(h) < 2**-24 (half an ulp of 1). The floors keep nu, beta > 0 and
# alpha - 1 > 0 exactly representable: 1e-6 is about 8 ulp of 1.0 in float32 (eps 1.19e-7),
# so alpha = 1 + 1e-6 stays distinct from 1, while it is far below any value the hyperpriors
# (Gam(5, 1), mean 5) favour, so it never shapes a trained critic.
EVIDENCE_FLOOR = 1e-6


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def nig_nll(y, omega, nu, alpha, beta):
    """Elementwise negative log marginal likelihood -log St(y | omega, beta(1+nu)/(nu alpha), 2 alpha).

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
    return (
        0.5 * (math.log(math.pi) - torch.log(nu) + log_omega_cap)
        + (alpha + 0.5) * torch.log1p(squared_error_ratio)
        + torch.lgamma(alpha)
        - torch.lgamma(alpha + 0.5)
    )


def _gamma_log_pdf(x, shape, rate):
    """log Gam(x | shape, rate) with the shape/rate parametrization (mean shape/rate)."""
    return shape * math.log(rate) - math.lgamma(shape) + (shape - 1.0) * torch.log(x) - rate * x


def nig_log_hyperprior(
    omega,
    nu,
    alpha,
    beta,
    omega_loc=0.0,
    omega_scale=100.0,
    nu_shape=5.0,
    nu_rate=1.0,
    alpha_shape=5.0,
    alpha_rate=1.0,
    beta_shape=5.0,
    beta_rate=1.0,
):
    """Elementwise log p(m) of the hyperpriors (paper Sec. 3.1 and Table tab:shared_hyperparameters).

    log N(omega | omega_loc, omega_scale^2) + log Gam(nu | 5, 1) + log Gam(alpha - 1 | 5, 1)
    + log Gam(beta | 5, 1); the alpha prior is shifted by +1 (table footnote) so alpha > 1.
    One term per evidential parameter, as in the plate model: Algorithm 1 writes log p(nu) twice
    and omits log p(beta), which we read as a typo.
    """
    log_p_omega = (
        -0.5 * math.log(2.0 * math.pi) - math.log(omega_scale) - 0.5 * ((omega - omega_loc) / omega_scale).square()
    )
    return (
        log_p_omega
        + _gamma_log_pdf(nu, nu_shape, nu_rate)
        + _gamma_log_pdf(alpha - 1.0, alpha_shape, alpha_rate)
        + _gamma_log_pdf(beta, beta_shape, beta_rate)
    )


def nig_variance_split(nu, alpha, beta):
    """(aleatoric, epistemic) variance of the value: E[sigma^2] = beta/(alpha-1), var[mu] = beta/(nu(alpha-1))."""
    aleatoric = beta / (alpha - 1.0)
    return aleatoric, aleatoric / nu


def nig_value_variance(nu, alpha, beta):
    """var[V] = beta/(alpha-1) * (1 + 1/nu), the law of total variance in paper Sec. 3.1."""
    aleatoric, epistemic = nig_variance_split(nu, alpha, beta)
    return aleatoric + epistemic


def probabilistic_gae(
    rewards, values, value_vars, next_values, next_value_vars, terminations, dones, gamma, gae_lambda, variant
):
    """Mean and variance of GAE(lambda) under an evidential critic (Algorithm 1, lines 7-17).

    All inputs are (T, N) tensors on one device. next_values[t] / next_value_vars[t] are the critic's
    mean / variance at the true next state s_{t+1} (the final observation when the episode was
    truncated); terminations[t] = 1 when s_{t+1} is terminal; dones[t] = 1 when the episode ended at
    step t (termination or truncation). Returns (advantages, advantage_vars), both (T, N).
    """
    if variant not in GAE_VARIANTS:
        raise ValueError(f"unknown GAE variant {variant!r}; valid choices: {', '.join(GAE_VARIANTS)}")
    not_terminal = 1.0 - terminations
    not_done = 1.0 - dones
    deltas = rewards + gamma * not_terminal * next_values - values
    advantages = torch.zeros_like(values)
    future_value_var = torch.zeros_like(values)  # S_t = sum_{l>=1} (gamma lambda)^{2l} var[V_{t+l}]
    advantage = torch.zeros_like(values[0])
    future_var = torch.zeros_like(values[0])
    decay = gamma * gae_lambda
    for t in reversed(range(values.shape[0])):
        advantage = deltas[t] + decay * not_done[t] * advantage
        advantages[t] = advantage
        # Algorithm 1 line 13, except that a terminal s_{t+1} adds no variance: its value is the
        # constant 0 (the delta above drops it), not a critic prediction.
        future_var = decay**2 * (not_terminal[t] * next_value_vars[t] + not_done[t] * future_var)
        future_value_var[t] = future_var
    if variant == "mean":
        return advantages, torch.zeros_like(advantages)
    future_weight = ((1.0 - gae_lambda) / gae_lambda) ** 2
    if variant == "cor":
        current_weight = 1.0  # Eq. (gae_var), EPPO_cor
    else:
        current_weight = (1.0 - gae_lambda) / (1.0 + gae_lambda)  # Eq. (gae_var_ind), EPPO_ind
    return advantages, current_weight * value_vars + future_weight * future_value_var


class EvidentialCritic(nn.Module):
    """PPO's critic trunk with a 4-output head for the NIG parameters (omega, nu, alpha, beta)."""

    def __init__(self, obs_dim, hidden_dim=256):
        super().__init__()
        self.trunk = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden_dim)),
            nn.LayerNorm(hidden_dim),
            nn.ReLU(),
            layer_init(nn.Linear(hidden_dim, hidden_dim)),
            nn.LayerNorm(hidden_dim),
            nn.ReLU(),
        )
        self.head = layer_init(nn.Linear(hidden_dim, 4), std=1.0)

    def hidden_activations(self, x):
        """Post-activation output of every hidden layer, first to last."""
        activations = []
        for layer in self.trunk:
            x = layer(x)
            if isinstance(layer, nn.ReLU):
                activations.append(x)
        return activations

    def features(self, x):
        """Post-activation output of the last hidden layer."""
        return self.trunk(x)

    def forward(self, x):
        raw_omega, raw_nu, raw_alpha, raw_beta = self.head(self.trunk(x)).unbind(-1)
        nu = F.softplus(raw_nu) + EVIDENCE_FLOOR
        alpha = F.softplus(raw_alpha) + 1.0 + EVIDENCE_FLOOR  # alpha > 1 keeps var[V] finite (Sec. 3.1)
        beta = F.softplus(raw_beta) + EVIDENCE_FLOOR
        return raw_omega, nu, alpha, beta
