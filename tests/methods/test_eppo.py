"""Tests for eppo_continuous.py: evidential losses, probabilistic GAE, UCB, evidential critic, CLI and tiny runs, and
the phase functions (advantages, targets, losses, one update step) against the independent reference of
tests/reference_math.py.

The properties every algorithm script shares (evaluation protocol, same seed -> same evaluations.csv, resume,
preemption, a seed's independence of the seeds trained beside it) are tested for eppo_continuous.py (default variant
ind) in tests/plumbing/test_all_scripts.py. The networks hold K stacked seeds: inputs and outputs have a leading seed
axis.
"""

import dataclasses
import itertools
import json
import math
import os
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats

import eppo_continuous
import ppo_continuous
import reference_math
from eppo_continuous import (
    EVIDENCE_FLOOR,
    EXP_INPUT_MAX,
    PRIOR_MODE_WEIGHT_SCALE,
    FALLBACK_KAPPA,
    CRITIC_LOSSES,
    LOG_HYPERPRIORS,
    Args,
    EvidentialCritic,
    algorithm1_log_hyperprior,
    critic_as_read,
    default_kappa,
    method_name,
    near_termination,
    evidence_transform,
    evidential_critic_loss,
    evidential_diagnostics,
    gamma_mode,
    head_gradient_shares,
    hyperprior_weight,
    inverse_evidence_transform,
    nig_log_hyperprior,
    nig_nll,
    nig_value_variance,
    nig_variance_split,
    nll_error_rescaling,
    probabilistic_gae,
    student_t_scale,
    ucb_advantages,
    validate_args,
)
from reference_math import brute_force_gae
from tiny_run import TINY_EVALUATION_STEPS, assert_refused_in_one_line, read_csv, run_script


def network_args(hidden_dim: int, **flags) -> Args:
    """The script's Args with networks ``hidden_dim`` wide and ``flags`` (the rest at their defaults)."""
    return dataclasses.replace(Args(), hidden_dim=hidden_dim, **flags)

def _generators(*seeds):
    """One torch.Generator per seed, as the script makes them (the networks draw seed k's weights from the k-th)."""
    return [torch.Generator().manual_seed(seed) for seed in seeds]


# Extreme inputs the losses must survive in float32 (the critic's dtype).
EXTREME_ERRORS = [0.0, 1e-3, 1.0, 1e4]
EXTREME_POSITIVE = [1e-6, 1e-3, 1.0, 1e3, 1e6]
EXTREME_ALPHAS = [1.0 + 1e-6, 1.5, 5.0, 1e3]


def _extreme_grid():
    """Every combination of the extreme values, as float32 leaf tensors requiring grad."""
    rows = list(itertools.product(EXTREME_ERRORS, EXTREME_POSITIVE, EXTREME_ALPHAS, EXTREME_POSITIVE))
    error, nu, alpha, beta = (torch.tensor(column, dtype=torch.float32) for column in zip(*rows))
    y = error.clone().requires_grad_()
    omega = torch.zeros_like(y).requires_grad_()
    return y, omega, nu.requires_grad_(), alpha.requires_grad_(), beta.requires_grad_()


def test_nll_is_student_t_negative_log_pdf():
    # Reference: the Student-t marginal of the NIG model, St(y | omega, beta(1+nu)/(nu alpha), 2 alpha)
    # (paper Sec. 2.2), with scipy's scale = sqrt of that squared scale.
    grid = list(itertools.product([-3.0, 0.0, 0.5, 20.0], [0.5, -1.0], [0.1, 1.0, 7.0], [1.01, 2.0, 9.0], [0.2, 3.0]))
    y, omega, nu, alpha, beta = (torch.tensor(column, dtype=torch.float64) for column in zip(*grid))
    expected = -stats.t.logpdf(
        y.numpy(), df=2 * alpha.numpy(), loc=omega.numpy(), scale=torch.sqrt(beta * (1 + nu) / (nu * alpha)).numpy()
    )
    np.testing.assert_allclose(nig_nll(y, omega, nu, alpha, beta).numpy(), expected, rtol=1e-10, atol=1e-10)


def test_nll_float32_accuracy_and_finite_gradients_at_extremes():
    y, omega, nu, alpha, beta = _extreme_grid()
    loss = nig_nll(y, omega, nu, alpha, beta)
    loss.sum().backward()
    for name, tensor in [("loss", loss), ("y", y.grad), ("omega", omega.grad), ("nu", nu.grad), ("alpha", alpha.grad),
                         ("beta", beta.grad)]:
        assert torch.isfinite(tensor).all(), f"non-finite {name}"
    y64, nu64, alpha64, beta64 = (t.detach().double().numpy() for t in (y, nu, alpha, beta))
    expected = -stats.t.logpdf(y64, df=2 * alpha64, scale=np.sqrt(beta64 * (1 + nu64) / (nu64 * alpha64)))
    # float32 lgamma(alpha) - lgamma(alpha + 1/2) loses ~1e-3 absolute at alpha = 1e3; elsewhere ~1e-6 relative.
    np.testing.assert_allclose(loss.detach().double().numpy(), expected, rtol=1e-3, atol=2e-3)


def test_nll_gradient_matches_closed_form_error_rescaling():
    # Paper, paragraph "Plasticity preservation through evidential value learning":
    # dL/d omega = -zeta * 2 (y - omega), zeta = (alpha + 1/2) nu / (nu (y - omega)^2 + 2 beta (1 + nu)).
    y = torch.tensor([0.3, -2.0, 15.0], dtype=torch.float64)
    omega = torch.tensor([0.0, 1.0, -4.0], dtype=torch.float64, requires_grad=True)
    nu, alpha, beta = (torch.tensor(v, dtype=torch.float64)
                       for v in ([0.5, 2.0, 8.0], [1.2, 3.0, 6.0], [0.1, 1.0, 4.0]))
    nig_nll(y, omega, nu, alpha, beta).sum().backward()
    error = y - omega.detach()
    zeta = (alpha + 0.5) * nu / (nu * error**2 + 2 * beta * (1 + nu))
    torch.testing.assert_close(omega.grad, -zeta * 2 * error)


def test_hyperprior_is_sum_of_scipy_log_densities():
    omega = torch.tensor([-150.0, 0.0, 3.5], dtype=torch.float64)
    nu = torch.tensor([0.2, 5.0, 40.0], dtype=torch.float64)
    alpha = torch.tensor([1.05, 4.0, 12.0], dtype=torch.float64)
    beta = torch.tensor([0.01, 3.0, 9.0], dtype=torch.float64)
    # Paper Table (EPPO-related): N(0, 100^2), Gam(5, 1) for nu, alpha - 1, beta; scipy's gamma has scale = 1/rate.
    expected = (
        stats.norm.logpdf(omega, loc=0, scale=100)
        + stats.gamma.logpdf(nu, a=5, scale=1)
        + stats.gamma.logpdf(alpha - 1, a=5, scale=1)
        + stats.gamma.logpdf(beta, a=5, scale=1)
    )
    np.testing.assert_allclose(nig_log_hyperprior(omega, nu, alpha, beta).numpy(), expected, rtol=1e-12)
    # Non-default hyperparameters reach the right terms (rate, not scale).
    custom = dict(omega_loc=2.0, omega_scale=3.0, nu_shape=2.0, nu_rate=0.5, alpha_shape=3.0, alpha_rate=4.0,
                  beta_shape=1.5, beta_rate=2.0)
    expected = (
        stats.norm.logpdf(omega, loc=2, scale=3)
        + stats.gamma.logpdf(nu, a=2, scale=1 / 0.5)
        + stats.gamma.logpdf(alpha - 1, a=3, scale=1 / 4.0)
        + stats.gamma.logpdf(beta, a=1.5, scale=1 / 2.0)
    )
    np.testing.assert_allclose(nig_log_hyperprior(omega, nu, alpha, beta, custom).numpy(), expected, rtol=1e-12)


def test_hyperprior_finite_with_gradients_at_extremes():
    _, omega, nu, alpha, beta = _extreme_grid()
    omega = (torch.tensor(1e4) * torch.ones_like(nu)).requires_grad_()
    log_prior = nig_log_hyperprior(omega, nu, alpha, beta)
    log_prior.sum().backward()
    for name, tensor in [("log_prior", log_prior), ("omega", omega.grad), ("nu", nu.grad), ("alpha", alpha.grad),
                         ("beta", beta.grad)]:
        assert torch.isfinite(tensor).all(), f"non-finite {name}"


def test_value_variance_is_student_t_variance_and_split_is_law_of_total_variance():
    nu = np.array([0.1, 1.0, 30.0])
    alpha = np.array([1.5, 3.0, 8.0])
    beta = np.array([0.2, 1.0, 5.0])
    as_tensor = lambda array: torch.tensor(array, dtype=torch.float64)  # noqa: E731
    total = nig_value_variance(as_tensor(nu), as_tensor(alpha), as_tensor(beta)).numpy()
    # The marginal St(omega, beta(1+nu)/(nu alpha), 2 alpha) has variance scale^2 * df / (df - 2).
    np.testing.assert_allclose(total, stats.t.var(df=2 * alpha, scale=np.sqrt(beta * (1 + nu) / (nu * alpha))))
    split = nig_variance_split(as_tensor(nu), as_tensor(alpha), as_tensor(beta))
    aleatoric, epistemic = (part.numpy() for part in split)
    # E[sigma^2] under InvGam(alpha, beta); var[mu] = E[sigma^2] / nu.
    np.testing.assert_allclose(aleatoric, stats.invgamma.mean(alpha, scale=beta))
    np.testing.assert_allclose(epistemic, stats.invgamma.mean(alpha, scale=beta) / nu)


def _random_rollout(seed, num_steps=13, num_envs=3):
    generator = torch.Generator().manual_seed(seed)
    rand = lambda: torch.rand(num_steps, num_envs, generator=generator, dtype=torch.float64)  # noqa: E731
    terminations = (rand() < 0.15).double()
    truncations = (rand() < 0.15).double() * (1 - terminations)
    return dict(
        rewards=rand() * 2 - 1,
        values=rand() * 4 - 2,
        value_vars=rand() + 0.1,
        next_values=rand() * 4 - 2,
        next_value_vars=rand() + 0.1,
        terminations=terminations,
        dones=torch.clamp(terminations + truncations, max=1.0),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_probabilistic_gae_matches_brute_force(seed):
    gamma, gae_lambda = 0.99, 0.95
    rollout = _random_rollout(seed)
    assert rollout["terminations"].sum() > 0 and (rollout["dones"] - rollout["terminations"]).sum() > 0
    advantage, future_var = brute_force_gae(*(rollout[key].numpy() for key in ("rewards", "values", "next_values",
                                                                           "terminations", "dones")),
                                            gamma, gae_lambda, next_value_vars=rollout["next_value_vars"].numpy())
    value_var = rollout["value_vars"].numpy()
    future_weight = ((1 - gae_lambda) / gae_lambda) ** 2
    expected_vars = {
        "mean": np.zeros_like(advantage),
        "cor": value_var + future_weight * future_var,  # Eq. (gae_var)
        "ind": (1 - gae_lambda) / (1 + gae_lambda) * value_var + future_weight * future_var,  # Eq. (gae_var_ind)
    }
    for variant, expected_var in expected_vars.items():
        advantages, advantage_vars = probabilistic_gae(**rollout, gamma=gamma, gae_lambda=gae_lambda, variant=variant)
        np.testing.assert_allclose(advantages.numpy(), advantage, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(advantage_vars.numpy(), expected_var, rtol=1e-12, atol=1e-12)


def test_probabilistic_gae_with_a_seed_axis_is_each_seeds_own():
    """Time first, (T, seeds, envs) views of (seeds, T, envs) buffers as in the script: every seed's advantages and
    variances are exactly those of its own rollout, and they keep the buffers' layout (each seed's contiguous, so
    the script's reductions over a seed's samples do not depend on the number of seeds)."""
    rollouts = [_random_rollout(seed, num_steps=17, num_envs=3) for seed in (4, 5)]
    stacked_inputs = {key: torch.stack([r[key] for r in rollouts]).transpose(0, 1) for key in rollouts[0]}
    for variant in ("mean", "cor", "ind"):
        stacked = probabilistic_gae(**stacked_inputs, gamma=0.99, gae_lambda=0.95, variant=variant)
        for part in stacked:
            assert part.transpose(0, 1).is_contiguous()
        for k, rollout in enumerate(rollouts):
            alone = probabilistic_gae(**rollout, gamma=0.99, gae_lambda=0.95, variant=variant)
            for stacked_part, alone_part in zip(stacked, alone):
                assert torch.equal(stacked_part[:, k], alone_part), variant


def test_probabilistic_gae_without_episode_ends_matches_infinite_sum_formula():
    # One long episode, constant value variance v: S_t -> v * q / (1 - q), q = (gamma lambda)^2, far from the
    # buffer end, so EPPO_cor's variance tends to v (1 + ((1 - lambda)/lambda)^2 q / (1 - q)).
    gamma, gae_lambda, value_var, num_steps = 0.99, 0.95, 0.7, 400
    zeros = torch.zeros(num_steps, 1, dtype=torch.float64)
    _, advantage_vars = probabilistic_gae(
        zeros, zeros, zeros + value_var, zeros, zeros + value_var, zeros, zeros, gamma, gae_lambda, "cor"
    )
    q = (gamma * gae_lambda) ** 2
    expected = value_var * (1 + ((1 - gae_lambda) / gae_lambda) ** 2 * q / (1 - q))
    assert math.isclose(advantage_vars[0, 0].item(), expected, rel_tol=1e-12)


def test_mean_advantages_equal_ppo_gae():
    rollout = _random_rollout(3, num_steps=64, num_envs=4)
    expected = ppo_continuous.gae(rollout["rewards"], rollout["values"], rollout["next_values"],
                                  rollout["terminations"], rollout["dones"], 0.99, 0.95)
    for variant in ("mean", "cor", "ind"):  # the variance never changes the mean
        advantages, _ = probabilistic_gae(**rollout, gamma=0.99, gae_lambda=0.95, variant=variant)
        torch.testing.assert_close(advantages, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("across", [False, True])
def test_gae_across_truncations_cuts_the_mean_and_the_variance_recursions_alike(across):
    """compute_advantages with --gae-across-truncations (ObjectRL's code): both of probabilistic_gae's recursions, the
    mean's and the future variance's, run on across a truncation and stop only at terminations: the batch's
    advantage std (EPPO_ind) and mean advantages (returns - values, --no-ucb-in-returns) are brute_force_gae's with
    the terminations as the episode ends; without the flag, with every episode end."""
    from test_ppo import rollout_with_episode_ends, script_run

    run = script_run(eppo_continuous, gae_across_truncations=across, ucb_in_returns=False)
    rollout = rollout_with_episode_ends(truncated=True)
    batch = eppo_continuous.compute_advantages(run, rollout, run.args)
    with torch.no_grad():
        values, nu, alpha, beta = (x.reshape(rollout.shape) for x in run.agent.critic(rollout.obs))
        next_values, *next_evidence = (x.reshape(rollout.shape) for x in run.agent.critic(rollout.next_obs))
        value_vars, next_value_vars = nig_value_variance(nu, alpha, beta), nig_value_variance(*next_evidence)
    episode_ends = rollout.terminations if across else rollout.dones
    gamma, gae_lambda = run.args.gamma, run.args.gae_lambda
    for k in range(2):
        advantage, future_var = brute_force_gae(
            rollout.rewards[k].numpy(), values[k].numpy(), next_values[k].numpy(), rollout.terminations[k].numpy(),
            episode_ends[k].numpy(), gamma, gae_lambda, next_value_vars=next_value_vars[k].numpy())
        expected_var = ((1 - gae_lambda) / (1 + gae_lambda) * value_vars[k].double().numpy()
                        + ((1 - gae_lambda) / gae_lambda) ** 2 * future_var)
        np.testing.assert_allclose(batch["returns"][k].numpy() - values[k].numpy().reshape(-1), advantage.reshape(-1),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(batch["evidence"]["advantage_stds"][k].double().numpy() ** 2, expected_var,
                                   rtol=1e-4, atol=1e-7)


def test_zero_lambda_is_rejected_before_probabilistic_gae():
    """probabilistic_gae takes the values the command line can give: the variant's choices are checked once, by tyro
    on the command line (test_bad_eppo_flags_exit_with_code_2), and lambda > 0 for cor and ind by validate_method."""
    for variant in ("cor", "ind"):
        with pytest.raises(ValueError, match=f"--gae-lambda must be > 0 with --variant {variant}"):
            validate_args(dataclasses.replace(Args(), variant=variant, gae_lambda=0.0))
    validate_args(dataclasses.replace(Args(), variant="mean", kappa=0.0, gae_lambda=0.0))  # no variance, no weight


def test_ucb_bonus_is_added_before_the_returns_as_in_algorithm_1():
    advantages = torch.tensor([0.5, -1.0, 2.0])
    stds = torch.tensor([1.0, 4.0, 0.0])
    values = torch.tensor([10.0, 20.0, 30.0])
    ucb = ucb_advantages(advantages, stds, kappa=0.1)
    torch.testing.assert_close(ucb, torch.tensor([0.6, -0.6, 2.0]))
    torch.testing.assert_close(ucb + values, torch.tensor([10.6, 19.4, 32.0]))  # R = A + kappa sigma + omega


@pytest.mark.parametrize("transform", ["softplus", "exp"])
def test_critic_constraints_hold_for_saturated_head_in_float32(transform):
    critic = critic_as_read(3, network_args(8, evidence_transform=transform), _generators(0, 1))
    obs = torch.randn(2, 5, 3)
    for head_bias in (-200.0, 0.0, 200.0):
        with torch.no_grad():
            critic.head.weight.zero_()
            critic.head.bias.fill_(head_bias)
        omega, nu, alpha, beta = critic(obs)
        assert (nu > 0).all() and (beta > 0).all() and (alpha - 1 > 0).all()
        if head_bias < 0:  # softplus(-200) and exp(-200) underflow to 0: only the floor is left
            assert torch.all(nu == torch.tensor(EVIDENCE_FLOOR)) and torch.all(alpha - 1 > 0.5 * EVIDENCE_FLOOR)
        target = torch.full_like(omega, 1e4)
        loss = nig_nll(target, omega, nu, alpha, beta).mean() - 0.01 * nig_log_hyperprior(omega, nu, alpha, beta).mean()
        critic.zero_grad()
        loss.backward()
        assert torch.isfinite(loss)
        assert all(torch.isfinite(p.grad).all() for p in critic.parameters())
        assert torch.isfinite(nig_value_variance(nu, alpha, beta)).all()


def test_critic_features_are_last_hidden_activation():
    critic = EvidentialCritic(obs_dim=4, args=network_args(16), generators=_generators(0, 1, 2))
    obs = torch.randn(3, 7, 4)
    activations = critic.hidden_activations(obs)
    assert [a.shape for a in activations] == [torch.Size([3, 7, 16])] * 2
    assert all((a >= 0).all() for a in activations)  # post-ReLU
    torch.testing.assert_close(critic.features(obs), activations[-1])
    outputs = critic(obs)
    assert len(outputs) == 4 and all(o.shape == (3, 7) for o in outputs)


@pytest.fixture
def single_thread():
    """Tiny matrices: extra intra-op threads only contend for the shared CPU cores."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.mark.parametrize("transform, init", [("softplus", "default"), ("exp", "prior-mode")])
def test_a_seed_of_the_stacked_critic_does_not_depend_on_the_seeds_beside_it(transform, init, single_thread):
    """Seed 8's evidence, NIG loss terms, gradients and head shares are bit-identical alone, at position 0 and at
    position 1 of a two-seed critic; 37 samples put the seeds' slices off the CPU's vector width (the transforms and
    the NLL's log, log1p and lgamma must not round a seed's elements by their place in the stacked tensor)."""
    data = torch.Generator().manual_seed(0)
    obs, y = torch.randn(37, 5, generator=data), 5.0 * torch.randn(37, generator=data)
    other_obs, other_y = torch.randn(37, 5, generator=data), 5.0 * torch.randn(37, generator=data)
    results = []
    for seeds in ((8,), (8, 3), (3, 8)):
        critic = critic_as_read(5, network_args(16, evidence_transform=transform, evidence_init=init),
                                _generators(*seeds))
        position = seeds.index(8)
        batch_obs = torch.stack([obs if seed == 8 else other_obs for seed in seeds])
        batch_y = torch.stack([y if seed == 8 else other_y for seed in seeds])
        evidence = critic(batch_obs)
        losses = evidential_critic_loss(batch_y, *evidence, 0.01)
        losses[0].sum().backward()  # as the script: summed over seeds, each seed's gradient is its own loss's
        shares = head_gradient_shares(critic.head.weight.grad, critic.head.bias.grad[:, 0])
        results.append([t.detach()[position] for t in (*evidence, *losses, shares)]
                       + [p.grad[position] for p in critic.parameters()])
    for other in results[1:]:
        for alone, beside in zip(results[0], other):
            assert torch.equal(alone, beside)


def test_critic_learns_noisy_regression(single_thread):
    # y = sin(x) + N(0, 0.1^2): omega must approach sin(x) and the NLL must fall.
    torch.manual_seed(0)
    x = torch.linspace(-3, 3, 128).reshape(1, 128, 1)  # one seed
    target = torch.sin(x).squeeze(-1)
    y = target + 0.1 * torch.randn(1, 128)
    critic = EvidentialCritic(obs_dim=1, args=network_args(64), generators=_generators(0))
    optimizer = torch.optim.Adam(critic.parameters(), lr=3e-3)

    def losses():
        omega, nu, alpha, beta = critic(x)
        nll = nig_nll(y, omega, nu, alpha, beta).mean()
        return nll, nll - 0.01 * nig_log_hyperprior(omega, nu, alpha, beta).mean()

    initial_nll = losses()[0].item()
    for _ in range(500):
        optimizer.zero_grad()
        losses()[1].backward()
        optimizer.step()
    final_nll = losses()[0].item()
    with torch.no_grad():
        omega = critic(x)[0]
    assert final_nll < initial_nll - 1.0, (initial_nll, final_nll)
    assert torch.mean((omega - target) ** 2).item() < 0.02


# The values validate_args checks; a choice flag's values are checked once, by tyro on the command line
# (test_bad_eppo_flags_exit_with_code_2), and not again by the pure functions that take them (evidence_transform,
# hyperprior_weight, evidential_critic_loss, probabilistic_gae, ...)
BAD_EPPO_ARGS = [
    (dict(kappa=-0.1), "--kappa"),
    (dict(kappa=float("nan")), "--kappa"),
    (dict(variant="mean", kappa=0.1), "--variant mean"),
    (dict(variant="cor", gae_lambda=0.0), "--gae-lambda"),
    (dict(xi=-1.0), "--xi"),
    (dict(clip_vloss=True), "--clip-vloss"),
]


@pytest.mark.parametrize("changes, flag", BAD_EPPO_ARGS, ids=[str(c) for c, _ in BAD_EPPO_ARGS])
def test_validate_args_names_the_bad_flag(changes, flag):
    with pytest.raises(ValueError, match=flag):
        validate_args(dataclasses.replace(Args(), **changes))


def test_paper_configurations_are_valid():
    for variant, kappa in (("mean", 0.0), ("cor", 0.25), ("ind", 0.01)):
        validate_args(dataclasses.replace(Args(), variant=variant, kappa=kappa))


def test_default_kappa_is_the_papers_for_every_setting():
    """Without --kappa, cor/ind take their column of scripts/paper_kappa.csv, read here by the sweeps' reader."""
    from scripts.runlist import read_kappa_table

    table = read_kappa_table()
    assert len(table) == 14  # the paper's 4 slippery + 10 paralysis settings
    for setting, kappas in table.items():
        for variant in ("cor", "ind"):
            args = dataclasses.replace(Args(), env_id=f"{setting.env}-v5", experiment=setting.experiment,
                                       strategy=setting.strategy, variant=variant)
            kappa, source = default_kappa(args)
            assert kappa == kappas[f"EPPO_{variant}"] and "paper_kappa.csv" in source, (setting, variant)
    assert default_kappa(Args())[0] == 0.01  # HalfCheetah paralysis back-one, EPPO_ind: the paper's 0.01
    assert default_kappa(dataclasses.replace(Args(), variant="mean"))[0] == 0.0
    assert default_kappa(dataclasses.replace(Args(), experiment="none"))[0] == FALLBACK_KAPPA
    assert default_kappa(dataclasses.replace(Args(), env_id="Hopper-v5"))[0] == FALLBACK_KAPPA


def test_run_without_kappa_uses_and_records_the_papers(tmp_path):
    """HalfCheetah paralysis cross-v1: the paper's kappa is 0.25 for EPPO_ind (0.05 for cor), unlike any default."""
    run_dir = tmp_path / "run"
    result = run_script("eppo_continuous.py", run_dir, "--strategy", "cross-v1", "--num-tasks", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "kappa 0.25 (the paper's for paralysis/HalfCheetah/cross-v1" in result.stdout
    with open(run_dir / "config.json") as f:
        assert json.load(f)["args"]["kappa"] == 0.25
    # an explicit --kappa overrides it; resuming with a different one is refused (exit 2), not mixed into the run
    again = run_script("eppo_continuous.py", run_dir, "--strategy", "cross-v1", "--num-tasks", "1", "--kappa", "0.1")
    assert again.returncode == 2 and "kappa: 0.25 -> 0.1" in again.stderr


@pytest.mark.parametrize("flags, expected", [
    (["--variant", "upper"], "'--variant'. Expected one of ('mean', 'cor', 'ind')"),
    (["--variant", "mean", "--kappa", "0.1"], "--kappa must be 0 with --variant mean"),
    (["--kappa", "-1"], "--kappa"),
    (["--critic-loss", "huber"], "'--critic-loss'. Expected one of ('nll', 'mse', 'nll-mse-omega')"),
    (["--evidence-transform", "relu"], "'--evidence-transform'. Expected one of ('softplus', 'exp')"),
    (["--hyperprior-reduction", "max"], "'--hyperprior-reduction'. Expected one of ('mean', 'sum', 'once')"),
    (["--evidence-init", "zeros"], "'--evidence-init'. Expected one of ('default', 'prior-mode')"),
    (["--hyperprior-terms", "paper"], "'--hyperprior-terms'. Expected one of ('text', 'algorithm1')"),
    (["--critic-grad-clip", "per-head"], "'--critic-grad-clip'. Expected one of ('whole', 'none')"),
])
def test_bad_eppo_flags_exit_with_code_2(flags, expected, tmp_path):
    """One line and exit 2: the command line (tyro) checks every choice, the pure functions take valid ones."""
    assert_refused_in_one_line("eppo_continuous.py", tmp_path / "run", flags, expected, env={"COLUMNS": "200"})


def _scalar_tags(run_dir) -> dict:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {tag: [event.value for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


EVIDENTIAL_TAGS = ["evidential/" + name for name in ("omega", "aleatoric_variance", "epistemic_variance",
                                                      "advantage_std", "ucb_bonus", "alpha", "nu", "beta")]
EVIDENTIAL_TAGS += ["evidential/" + name for name in (
    "student_t_scale", "targets_outside_2_scales", "zeta", "critic_grad_norm", "grad_share_omega", "grad_share_nu",
    "grad_share_alpha", "grad_share_beta", "nu_min", "value_var_max", "error_elsewhere", "advantage_max_z")]
EVIDENTIAL_TAGS += ["losses/nll", "losses/hyperprior", "losses/value_loss", "plasticity/critic_max_abs_grad"]


@pytest.mark.parametrize("variant, kappa, extra", [("mean", "0", []), ("cor", "0.25", ["--no-ucb-in-returns"])])
def test_tiny_run_of_each_variant(variant, kappa, extra, tmp_path):
    """EPPO_ind (the default) runs in test_all_scripts.py; here the other two, with their logged evidence."""
    run_dir = tmp_path / "run"
    result = run_script("eppo_continuous.py", run_dir, "--variant", variant, "--kappa", kappa, *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_csv(os.path.join(run_dir, "evaluations.csv"))
    assert [(int(r["global_step"]), int(r["task"])) for r in rows] == TINY_EVALUATION_STEPS
    tags = _scalar_tags(run_dir)
    updates = 3  # 512 steps in rollouts of 128: updates after 128, 256 and 384 (the last rollout ends the run)
    for tag in EVIDENTIAL_TAGS:
        assert len(tags.get(tag, [])) == updates and np.isfinite(tags[tag]).all(), tag
    assert all(value > 1 for value in tags["evidential/alpha"])
    assert all(value > 0 for value in tags["evidential/nu"] + tags["evidential/beta"])
    if variant == "mean":
        assert tags["evidential/ucb_bonus"] == [0.0] * updates and tags["evidential/advantage_std"] == [0.0] * updates
    else:
        assert all(value > 0 for value in tags["evidential/ucb_bonus"])
    # value_loss = NLL + xi * (-log p(m)) (xi = 0.01 by default), averaged over the same minibatches
    np.testing.assert_allclose(tags["losses/value_loss"],
                               np.array(tags["losses/nll"]) + 0.01 * np.array(tags["losses/hyperprior"]), rtol=1e-5)


def test_each_seed_logs_its_own_evidence(tmp_path):
    """--num-seeds 2: every seed's run directory gets the evidential/ and loss tags of its own agent, bit-identical
    to what a one-seed run of that seed logs (seed 2 sits at position 1 of the group), and not its neighbour's."""
    group = run_script("eppo_continuous.py", tmp_path / "group" / "seed{seed}", "--seed", "1", "--num-seeds", "2")
    alone = run_script("eppo_continuous.py", tmp_path / "alone", "--seed", "2")
    assert group.returncode == 0, group.stderr[-3000:]
    assert alone.returncode == 0, alone.stderr[-3000:]
    tags = {name: _scalar_tags(tmp_path / name) for name in ("group/seed1", "group/seed2", "alone")}
    for tag in EVIDENTIAL_TAGS:
        assert len(tags["alone"][tag]) == 3, tag
        assert tags["group/seed2"][tag] == tags["alone"][tag], tag
    assert tags["group/seed1"]["evidential/omega"] != tags["group/seed2"]["evidential/omega"]
    assert tags["group/seed1"]["losses/nll"] != tags["group/seed2"]["losses/nll"]


# ---- The control (--critic-loss mse), the instrumentation and the open choices (docs/eppo_open_choices.md) ----


def _critic_and_batch(seed=0, **flags):
    """A one-seed critic with a minibatch of 32 observations and targets, (1, 32, 5) and (1, 32)."""
    generator = torch.Generator().manual_seed(seed + 1000)
    critic = critic_as_read(5, network_args(16, **flags), _generators(seed))
    return critic, torch.randn(1, 32, 5, generator=generator), 3.0 * torch.randn(1, 32, generator=generator)


def test_mse_critic_loss_is_ppos_and_leaves_the_evidence_rows_without_gradient():
    critic, obs, y = _critic_and_batch()
    omega, nu, alpha, beta = critic(obs)
    loss, nll, negative_log_prior = CRITIC_LOSSES["mse"](y, omega, nu, alpha, beta, 0.01, nig_log_hyperprior)
    torch.testing.assert_close(loss, ((omega - y) ** 2).mean(-1))  # ppo_continuous.py's value loss (Algorithm 1)
    torch.testing.assert_close(nll, nig_nll(y, omega, nu, alpha, beta).mean(-1))  # still logged
    loss.sum().backward()
    assert torch.all(critic.head.weight.grad[:, 1:] == 0) and torch.all(critic.head.bias.grad[..., 1:] == 0)
    assert critic.head.weight.grad[:, 0].abs().sum() > 0
    shares = head_gradient_shares(critic.head.weight.grad, critic.head.bias.grad[:, 0])
    assert shares.tolist() == [[1.0, 0.0, 0.0, 0.0]]
    # The evidential loss does move every row.
    critic.zero_grad()
    evidential_critic_loss(y, *critic(obs), 0.01)[0].sum().backward()
    assert torch.all(critic.head.weight.grad.abs().sum(-1) > 0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "once"])
def test_hyperprior_reduction_matches_its_definition(reduction):
    """L = mean NLL + w mean(-log p) equals each reduction written out with sums (Algorithm 1 uses 1/T sums)."""
    critic, obs, y = _critic_and_batch(1)
    xi, m = 0.01, y.shape[-1]
    evidence = critic(obs)
    nll_i, log_p_i = nig_nll(y, *evidence), nig_log_hyperprior(*evidence)
    reference = {"mean": nll_i.sum(-1) / m - xi * log_p_i.sum(-1) / m,
                 "sum": nll_i.sum(-1) / m - xi * log_p_i.sum(-1),
                 "once": (nll_i.sum(-1) - xi * log_p_i.mean(-1)) / m}[reduction]
    loss, nll, negative_log_prior = evidential_critic_loss(y, *evidence, hyperprior_weight(xi, reduction, m))
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(loss, nll + hyperprior_weight(xi, reduction, m) * negative_log_prior)
    assert hyperprior_weight(xi, reduction, 256) == {"mean": 0.01, "sum": 2.56, "once": 0.01 / 256}[reduction]


def test_head_gradient_shares_match_the_pre_activation_gradients():
    # Brute force: row k's gradient is sum_i g_ik (h_i, 1) for the gradients g at the head's outputs.
    critic, obs, y = _critic_and_batch(2)
    features = critic.trunk(obs).detach()
    pre_activations = critic.head(features)  # (1, 32, 4)
    pre_activations.retain_grad()
    omega, raw_nu, raw_alpha, raw_beta = pre_activations.unbind(-1)
    nu, beta = F.softplus(raw_nu) + EVIDENCE_FLOOR, F.softplus(raw_beta) + EVIDENCE_FLOOR
    alpha = F.softplus(raw_alpha) + 1 + EVIDENCE_FLOOR
    evidential_critic_loss(y, omega, nu, alpha, beta, 0.01)[0].backward()
    g = pre_activations.grad[0].double()
    expected = ((g.T @ features[0].double()) ** 2).sum(-1) + g.sum(0) ** 2
    expected = expected / expected.sum()
    shares = head_gradient_shares(critic.head.weight.grad, critic.head.bias.grad[:, 0])[0]
    np.testing.assert_allclose(shares.double().numpy(), expected.numpy(), rtol=1e-4, atol=1e-7)
    assert math.isclose(shares.sum().item(), 1.0, rel_tol=1e-6)
    assert head_gradient_shares(torch.zeros(4, 3), torch.zeros(4)).tolist() == [0.0] * 4
    # With a seed axis every seed's shares are its own: a zero gradient beside a nonzero one stays all 0.
    stacked = head_gradient_shares(torch.stack([torch.zeros(4, 16), critic.head.weight.grad[0]]),
                                   torch.stack([torch.zeros(4), critic.head.bias.grad[0, 0]]))
    assert stacked[0].tolist() == [0.0] * 4
    torch.testing.assert_close(stacked[1], shares, rtol=0, atol=0)


def test_student_t_scale_is_the_marginals_scale():
    nu, alpha, beta = (torch.tensor(v, dtype=torch.float64)
                       for v in ([0.1, 1.0, 30.0], [1.5, 3.0, 8.0], [0.2, 1.0, 5.0]))
    scale = student_t_scale(nu, alpha, beta)
    # St(omega, scale^2, 2 alpha): var = scale^2 * df / (df - 2) (scipy), which is var[V] of Sec. 3.1.
    np.testing.assert_allclose((scale**2 * 2 * alpha / (2 * alpha - 2)).numpy(),
                               nig_value_variance(nu, alpha, beta).numpy(), rtol=1e-12)
    np.testing.assert_allclose(scale.numpy() ** 2 * (2 * alpha.numpy()) / (2 * alpha.numpy() - 2),
                               stats.t.var(df=2 * alpha.numpy(), scale=scale.numpy()), rtol=1e-12)


def test_nll_error_rescaling_is_the_omega_gradient_over_mses():
    # dNLL/domega = zeta * dMSE/domega = -zeta 2 (y - omega), for random evidence and errors (float64).
    generator = torch.Generator().manual_seed(4)
    y = 5 * torch.randn(50, generator=generator, dtype=torch.float64)
    omega = torch.randn(50, generator=generator, dtype=torch.float64, requires_grad=True)
    nu, beta = (torch.rand(50, generator=generator, dtype=torch.float64) * 3 + 0.01 for _ in range(2))
    alpha = 1.01 + 5 * torch.rand(50, generator=generator, dtype=torch.float64)
    nig_nll(y, omega, nu, alpha, beta).sum().backward()
    error = y - omega.detach()
    torch.testing.assert_close(omega.grad, -nll_error_rescaling(error, nu, alpha, beta) * 2 * error)


@pytest.mark.parametrize("transform", ["softplus", "exp"])
def test_evidence_transform_inverse_and_extremes(transform):
    for value in (1e-4, 0.5, 4.0, 1e3):
        raw = inverse_evidence_transform(value, transform)
        assert math.isclose(evidence_transform(torch.tensor(raw, dtype=torch.float64), transform).item(), value,
                            rel_tol=1e-12)
    raw = torch.tensor([-1e4, -200.0, 0.0, 50.0, 200.0, 1e4], requires_grad=True)
    out = evidence_transform(raw, transform)
    assert torch.isfinite(out).all() and (out >= 0).all()
    out.sum().backward()
    assert torch.isfinite(raw.grad).all()
    if transform == "exp":  # capped: exp never overflows in float32
        assert out.max().item() == pytest.approx(math.exp(EXP_INPUT_MAX), rel=1e-6)


def test_gamma_mode_is_the_argmax_of_the_density():
    for shape, rate in ((5.0, 1.0), (2.5, 0.5), (9.0, 3.0)):
        grid = np.linspace(1e-3, 30, 300001)
        assert gamma_mode(shape, rate) == pytest.approx(grid[np.argmax(stats.gamma.pdf(grid, a=shape, scale=1 / rate))],
                                                        abs=1e-3)
    assert gamma_mode(5.0, 1.0) == 4.0


@pytest.mark.parametrize("transform", ["softplus", "exp"])
def test_prior_mode_init_starts_the_evidence_at_the_hyperpriors_modes(transform):
    default = critic_as_read(5, network_args(16, evidence_transform=transform), _generators(5, 6))
    critic = critic_as_read(5, network_args(16, evidence_transform=transform, evidence_init="prior-mode"),
                            _generators(5, 6))
    # Same random draws as the default init: omega's row is unchanged, the evidence rows are scaled down.
    torch.testing.assert_close(critic.head.weight[:, 0], default.head.weight[:, 0], rtol=0, atol=0)
    torch.testing.assert_close(critic.head.weight[:, 1:], PRIOR_MODE_WEIGHT_SCALE * default.head.weight[:, 1:])
    torch.testing.assert_close(critic.trunk[0].weight, default.trunk[0].weight, rtol=0, atol=0)
    # Both seeds' biases are set (and seed 0's omega row and bias stay the default's).
    torch.testing.assert_close(critic.head.bias[1], critic.head.bias[0], rtol=0, atol=0)
    assert critic.head.bias[0, 0, 0].item() == default.head.bias[0, 0, 0].item()
    # The bias alone gives the modes, where the gamma hyperpriors' log densities have zero gradient.
    bias = critic.head.bias.detach()[0, 0, 1:]
    nu, alpha, beta = (evidence_transform(b, transform) + EVIDENCE_FLOOR for b in bias)
    alpha = alpha + 1.0
    for value, expected in ((nu, 4.0), (alpha, 5.0), (beta, 4.0)):
        assert value.item() == pytest.approx(expected, rel=1e-6)
    evidence = [torch.zeros(()).requires_grad_()] + [v.clone().requires_grad_() for v in (nu, alpha, beta)]
    nig_log_hyperprior(*evidence).backward()
    for parameter in evidence[1:]:
        assert abs(parameter.grad.item()) < 1e-5
    # With the small weights every state starts near the modes.
    _, nu, alpha, beta = critic(torch.randn(2, 64, 5))
    for value, expected in ((nu, 4.0), (alpha, 5.0), (beta, 4.0)):
        assert (value - expected).abs().max().item() < 0.2


def test_every_script_has_the_same_reward_normalization_switch():
    """--norm-reward/--no-norm-reward, on by default since v0.3 (2026-11-29), in every script: training_reward on a
    stream of rewards with terminations equals gymnasium's NormalizeReward (its own RunningMeanStd as the reference:
    the discounted return restarts on termination, the reward is divided by its running std, then clipped); without
    the flag the reward is returned as it is and the statistics are still updated."""
    import importlib
    from types import SimpleNamespace

    from gymnasium.wrappers.utils import RunningMeanStd as GymnasiumRunningMeanStd

    from scripts import sync_plumbing

    rng = np.random.default_rng(3)
    seeds, envs, steps = 2, 3, 40
    rewards = rng.normal(scale=5.0, size=(steps, seeds, envs))
    rewards[7, 0, 1] = 400.0  # a reward that the clip at --normalization-clip stops (it is ~50 std)
    terminated = (rng.random((steps, seeds, envs)) < 0.1).astype(np.float64)
    scripts = [sync_plumbing.TEMPLATE, *sync_plumbing.SCRIPTS]
    assert len(scripts) >= 7
    for script in scripts:
        module = importlib.import_module(script[: -len(".py")])
        assert module.Args().norm_reward is True, script
        for norm_reward in (True, False):
            args = module.Args(norm_reward=norm_reward)
            agent = SimpleNamespace(discounted_return=np.zeros((seeds, envs)),
                                    return_rms=module.RunningMeanStd(seeds, ()))
            reference = [GymnasiumRunningMeanStd(shape=()) for _ in range(seeds)]
            discounted = np.zeros((seeds, envs))
            for t in range(steps):
                got = module.training_reward(agent, rewards[t], terminated[t], args)
                discounted = discounted * args.gamma * (1.0 - terminated[t]) + rewards[t]
                for k in range(seeds):
                    reference[k].update(discounted[k])
                std = np.sqrt(np.array([r.var for r in reference]) + 1e-8)[:, None]
                expected = np.clip(rewards[t] / std, -args.normalization_clip, args.normalization_clip)
                if norm_reward:
                    np.testing.assert_allclose(got, expected, rtol=1e-5, err_msg=f"{script} step {t}")
                else:
                    assert np.array_equal(got, rewards[t]), (script, t)
            np.testing.assert_allclose(agent.return_rms.var[:, 0], [r.var for r in reference], rtol=1e-10)


def _first_update(tags, tag):
    return tags[tag][0]


def test_tiny_run_of_the_mse_control_and_without_reward_normalization(tmp_path):
    # std 1 (v0.1's exploration noise, before 2026-11-27): HalfCheetah's discounted return then spreads far beyond 1
    control = ["--variant", "mean", "--kappa", "0", "--critic-loss", "mse", "--log-std-init", "0"]
    tags = {}
    for name, extra in (("norm", []), ("raw", ["--no-norm-reward"])):
        result = run_script("eppo_continuous.py", tmp_path / name, *control, *extra)
        assert result.returncode == 0, result.stderr[-3000:]
        tags[name] = _scalar_tags(tmp_path / name)
    for tag in EVIDENTIAL_TAGS:
        assert len(tags["norm"].get(tag, [])) == 3 and np.isfinite(tags["norm"][tag]).all(), tag
    # mse: only omega's row of the head gets a gradient; the value loss is not NLL + xi * hyperprior
    assert tags["norm"]["evidential/grad_share_omega"] == [1.0] * 3
    for row in ("nu", "alpha", "beta"):
        assert tags["norm"][f"evidential/grad_share_{row}"] == [0.0] * 3
    assert not np.allclose(tags["norm"]["losses/value_loss"],
                           np.array(tags["norm"]["losses/nll"]) + 0.01 * np.array(tags["norm"]["losses/hyperprior"]))
    # Raw HalfCheetah rewards: the discounted return's running std is far above 1, so the raw targets, and with
    # them the first update's squared error, are much larger than the normalized ones.
    assert _first_update(tags["raw"], "losses/value_loss") > 10 * _first_update(tags["norm"], "losses/value_loss")


def test_tiny_run_with_prior_mode_init_exp_transform_and_summed_hyperprior(tmp_path):
    run_dir = tmp_path / "run"
    result = run_script("eppo_continuous.py", run_dir, "--variant", "mean", "--kappa", "0", "--evidence-init",
                        "prior-mode", "--evidence-transform", "exp", "--hyperprior-reduction", "sum")
    assert result.returncode == 0, result.stderr[-3000:]
    tags = _scalar_tags(run_dir)
    # The first update's rollout is evaluated by the initial critic: the evidence sits at the modes.
    for tag, mode in (("evidential/nu", 4.0), ("evidential/alpha", 5.0), ("evidential/beta", 4.0)):
        assert _first_update(tags, tag) == pytest.approx(mode, abs=0.2), tag
    # sum: w = xi * minibatch size (64 in the tiny flags)
    np.testing.assert_allclose(tags["losses/value_loss"],
                               np.array(tags["losses/nll"]) + 0.64 * np.array(tags["losses/hyperprior"]), rtol=1e-5)
    shares = np.array([tags[f"evidential/grad_share_{row}"] for row in ("omega", "nu", "alpha", "beta")])
    np.testing.assert_allclose(shares.sum(0), 1.0, rtol=1e-5)


def test_method_name_marks_every_departure_from_the_defaults():
    assert method_name(Args()) == "EPPO_ind"
    assert method_name(dataclasses.replace(Args(), variant="mean", kappa=0.0)) == "EPPO_mean"
    assert method_name(dataclasses.replace(Args(), variant="mean", kappa=0.0, critic_loss="mse")) == "EPPO_mean+mse"
    every = dataclasses.replace(Args(), critic_loss="mse", xi=1.0, hyperprior_reduction="sum",
                                evidence_init="prior-mode", evidence_transform="exp", norm_reward=False,
                                ucb_in_returns=False)
    assert method_name(every) == "EPPO_ind+mse+xi1+hp-sum+prior-mode+exp+no-norm-reward+no-ucb-in-returns"
    # Distinct settings get distinct names (one table cell each).
    names = {method_name(dataclasses.replace(Args(), **{field: value})) for field, value in
             (("xi", 0.1), ("xi", 1.0), ("hyperprior_reduction", "once"), ("hyperprior_reduction", "sum"))}
    assert len(names) == 4


# ---- The diagnostics that tell the critic's mechanisms apart (studies/2026-11-29_eppo_ind_gap_on_ant) ----


def _near_termination_brute_force(terminations, dones, window):
    """For each step t: does its episode terminate at some s in t .. t + window - 1 with no episode end before s?"""
    T, n = terminations.shape
    near = np.zeros((T, n))
    for i in range(n):
        for t in range(T):
            for s in range(t, min(T, t + window)):
                if terminations[s, i]:
                    near[t, i] = 1.0
                    break
                if dones[s, i]:
                    break
    return near


@pytest.mark.parametrize("window", [1, 3, 50])
def test_near_termination_matches_brute_force(window):
    rng = np.random.default_rng(window)
    terminations = (rng.random((40, 6)) < 0.08).astype(np.float32)
    truncations = (rng.random((40, 6)) < 0.08).astype(np.float32)
    dones = np.maximum(terminations, truncations)
    near = near_termination(torch.from_numpy(terminations), torch.from_numpy(dones), window).numpy()
    np.testing.assert_array_equal(near, _near_termination_brute_force(terminations, dones, window))
    assert near_termination(torch.zeros(5, 2), torch.ones(5, 2), window).sum() == 0  # truncations only: never near


def test_evidential_diagnostics_extremes_and_termination_errors():
    """nu_min, value_var_max and the two error means against a by-hand computation on a (2 seeds, 4 steps, 1 env)
    rollout; a seed with no step near a termination gets NaN there, not 0."""
    values = torch.tensor([[0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0]])[..., None]
    returns = torch.tensor([[1.0, 3.0, 2.5, 3.0], [1.0, -1.0, 2.0, 0.5]])[..., None]
    nu = torch.tensor([[0.5, 2.0, 1.0, 3.0], [4.0, 5.0, 6.0, 0.25]])[..., None]
    alpha = torch.full_like(nu, 2.0)
    beta = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 1.0, 1.0]])[..., None]
    near = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])[..., None]
    diagnostics = evidential_diagnostics(values, nu, alpha, beta, torch.zeros_like(nu), returns, 0.0, near, values)
    assert diagnostics.shape == (2, 16)
    nu_min, value_var_max, near_error, elsewhere_error = diagnostics[:, 11:15].unbind(-1)
    np.testing.assert_array_equal(nu_min.numpy(), [0.5, 0.25])
    # var[V] = beta / (alpha - 1) (1 + 1/nu): seed 0's largest at nu = 0.5 (3.0), seed 1's at nu = 0.25 (5.0)
    np.testing.assert_allclose(value_var_max.numpy(), [3.0, 5.0])
    np.testing.assert_allclose(near_error[0].item(), (1.0 + 2.0) / 2)
    np.testing.assert_allclose(elsewhere_error.numpy(), [(0.5 + 0.0) / 2, (1.0 + 1.0 + 2.0 + 0.5) / 4])
    assert math.isnan(near_error[1].item())


def test_advantage_max_z_is_the_largest_normalized_advantage_and_one_outlier_reaches_its_bound():
    """evidential/advantage_max_z: max |A - mean| / std (numpy's std with ddof 1, Algorithm 1's line 19 by hand) over
    each seed's batch; one state's bonus alone (A = x there, 0 elsewhere) gives the most N samples allow,
    (N - 1) / sqrt(N), for any x: the normalized batch is then that state's alone."""
    generator = torch.Generator().manual_seed(0)
    spread = torch.randn(1, 64, 2, generator=generator, dtype=torch.float64)
    outlier = torch.zeros(1, 64, 2, dtype=torch.float64)
    outlier[0, 17, 1] = 1e6
    advantages = torch.cat([spread, outlier])
    ones = torch.ones_like(advantages)
    diagnostics = evidential_diagnostics(ones, ones, 2 * ones, ones, ones, ones, 0.1, ones, advantages)
    flat = spread.flatten().numpy()
    np.testing.assert_allclose(diagnostics[0, 15].item(), np.max(np.abs(flat - flat.mean())) / flat.std(ddof=1),
                               rtol=1e-6)
    np.testing.assert_allclose(diagnostics[1, 15].item(), 127 / math.sqrt(128), rtol=1e-9)


# ---- The readings of the critic, as flags, each defaulting to today's behaviour
# (studies/2026-11-29_eppo_ind_gap_on_ant) ----


def test_algorithm1_hyperprior_is_its_printed_line_against_scipy():
    """--hyperprior-terms algorithm1: log N(omega | 0, 100^2) + 2 log Gam(nu | 5, 1) + log Gam(alpha - 1 | 5, 1), with
    no beta term, so its gradient on beta is 0; text: the four terms of Sec. 3.1 (as before)."""
    omega, nu, alpha, beta = (torch.tensor(v, dtype=torch.float64, requires_grad=True)
                              for v in ([-30.0, 2.0], [0.3, 7.0], [1.2, 9.0], [0.05, 40.0]))
    algorithm1 = algorithm1_log_hyperprior(omega, nu, alpha, beta)
    text = nig_log_hyperprior(omega, nu, alpha, beta)
    o, n, a, b = (x.detach().numpy() for x in (omega, nu, alpha, beta))
    expected_algorithm1 = stats.norm.logpdf(o, 0, 100) + 2 * stats.gamma.logpdf(n, 5) + stats.gamma.logpdf(a - 1, 5)
    expected_text = stats.norm.logpdf(o, 0, 100) + stats.gamma.logpdf(n, 5) + stats.gamma.logpdf(a - 1, 5) \
        + stats.gamma.logpdf(b, 5)
    np.testing.assert_allclose(algorithm1.detach().numpy(), expected_algorithm1, rtol=1e-12)
    np.testing.assert_allclose(text.detach().numpy(), expected_text, rtol=1e-12)
    (beta_gradient,) = torch.autograd.grad(algorithm1.sum(), beta, allow_unused=True)
    assert beta_gradient is None or torch.all(beta_gradient == 0)


def test_nll_mse_omega_gives_omega_the_mean_squared_error_and_the_evidence_the_nll():
    """--critic-loss nll-mse-omega: d/d omega is MSE's 2 (omega - y) / M plus the prior's xi omega / (100^2 M),
    whatever the evidence (no rescaling by zeta); d/d (nu, alpha, beta) equals the nll loss's (omega enters the NLL
    only as a constant)."""
    y = torch.tensor([[0.0, 10.0, 200.0, -5.0]], dtype=torch.float64)
    m = y.shape[-1]
    inputs = [torch.tensor([[1.0, 2.0, -3.0, 4.0]]), torch.tensor([[0.5, 1.0, 2.0, 4.0]]),
              torch.tensor([[1.5, 2.0, 3.0, 6.0]]), torch.tensor([[0.2, 1.0, 5.0, 9.0]])]
    gradients = {}
    for loss_name in ("nll", "nll-mse-omega"):
        omega, nu, alpha, beta = (x.double().requires_grad_() for x in inputs)
        loss, nll, _ = CRITIC_LOSSES[loss_name](y, omega, nu, alpha, beta, 0.01, nig_log_hyperprior)
        gradients[loss_name] = torch.autograd.grad(loss.sum(), (omega, nu, alpha, beta))
        if loss_name == "nll-mse-omega":
            negative_log_prior = -nig_log_hyperprior(omega, nu, alpha, beta).mean(-1)
            expected_loss = (omega - y).square().mean(-1) + nll + 0.01 * negative_log_prior
            torch.testing.assert_close(loss, expected_loss)
    omega = inputs[0].double()
    torch.testing.assert_close(gradients["nll-mse-omega"][0], 2 * (omega - y) / m + 0.01 * omega / (100.0**2 * m))
    for ours, nll_only in zip(gradients["nll-mse-omega"][1:], gradients["nll"][1:]):
        torch.testing.assert_close(ours, nll_only)
    assert not torch.allclose(gradients["nll"][0], gradients["nll-mse-omega"][0])  # the nll discounts y = 200


def _one_update_run(critic_grad_clip: str):
    """A two-seed EPPO run state with a hand-built batch of 32 samples whose targets (1,000s) make the critic's
    gradient far larger than --max-grad-norm; one epoch of one minibatch."""
    import eppo_continuous as eppo

    args = dataclasses.replace(Args(), hidden_dim=8, minibatch_size=32, update_epochs=1,
                               critic_grad_clip=critic_grad_clip)
    run = eppo.Run()
    run.seeds, run.args, run.device = [1, 2], args, torch.device("cpu")
    run.generators = _generators(1, 2)
    run.agent = eppo.make_agent(args, 5, 2, _generators(1, 2), run.device)
    run.batch_size, run.seed_rows = 32, torch.arange(2)[:, None]
    run.consecutive_nonfinite = np.zeros(2, np.int64)
    run.global_step, run.total_steps, run.exit_code, run.iteration = 0, 1, 0, 0
    assert run.next_iteration()
    generator = torch.Generator().manual_seed(3)
    batch = {"obs": torch.randn(2, 32, 5, generator=generator), "actions": torch.randn(2, 32, 2, generator=generator),
             "old_log_probs": torch.zeros(2, 32), "advantages": torch.randn(2, 32, generator=generator),
             "returns": 1000.0 * torch.randn(2, 32, generator=generator)}
    eppo.update(run, batch, args)
    clipped_norms = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad.flatten(1), dim=1)
                                                          for p in run.agent.critic.parameters()]), dim=0)
    return run, clipped_norms


def test_critic_grad_clip_none_steps_on_the_unclipped_gradient():
    """--critic-grad-clip whole: the critic's step gradient has norm --max-grad-norm (0.5) when its norm is larger;
    none: the step gradient is the whole unclipped one (its norm is run.stats.grad_norms["critic"], far above 0.5)."""
    for clip in ("whole", "none"):
        run, step_norms = _one_update_run(clip)
        unclipped = run.stats.grad_norms["critic"]
        assert torch.all(unclipped > 5.0)
        expected = torch.full_like(unclipped, 0.5) if clip == "whole" else unclipped
        torch.testing.assert_close(step_norms, expected, rtol=1e-4, atol=0)


@pytest.mark.parametrize("flag, value", [("--hyperprior-terms", "paper"), ("--critic-grad-clip", "per-head"),
                                         ("--critic-loss", "huber")])
def test_bad_critic_reading_exits_2_naming_the_choices(flag, value, tmp_path):
    result = run_script("eppo_continuous.py", tmp_path / "run", flag, value)
    assert result.returncode == 2, result.stderr[-2000:]
    assert flag in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_ppo_loss_uses_the_chosen_hyperprior_terms_and_critic_loss():
    """The flags reach the loss a minibatch trains on: ppo_loss's critic loss is evidential_critic_loss with
    --hyperprior-terms and --critic-loss, on the critic's own prediction."""
    import eppo_continuous as eppo

    generator = torch.Generator().manual_seed(4)
    mb = {"obs": torch.randn(2, 16, 5, generator=generator), "actions": torch.randn(2, 16, 2, generator=generator),
          "old_log_probs": torch.zeros(2, 16), "advantages": torch.randn(2, 16, generator=generator),
          "returns": 50.0 * torch.randn(2, 16, generator=generator)}
    for terms, loss_name in (("algorithm1", "nll"), ("text", "nll-mse-omega"), ("algorithm1", "nll-mse-omega")):
        args = dataclasses.replace(Args(), hidden_dim=8, minibatch_size=16, hyperprior_terms=terms,
                                   critic_loss=loss_name)
        agent = eppo.make_agent(args, 5, 2, _generators(1, 2), torch.device("cpu"))
        losses, stats_ = eppo.ppo_loss(agent, mb, args)
        omega, nu, alpha, beta = agent.critic(mb["obs"])
        expected_prior = -LOG_HYPERPRIORS[terms](omega, nu, alpha, beta).mean(-1)
        torch.testing.assert_close(stats_["hyperprior"], expected_prior)
        expected = CRITIC_LOSSES[loss_name](mb["returns"], omega, nu, alpha, beta, 0.01, LOG_HYPERPRIORS[terms])[0]
        torch.testing.assert_close(losses["critic"], expected)
    assert eppo.method_name(args) == "EPPO_ind+nll-mse-omega+hp-algorithm1"


# ---- The phase functions against the independent reference (tests/reference_math.py) ----

# Each flag that changes EPPO's math, two seeds each, one or two envs per seed.
EPPO_CASES = {"ind": dict(num_envs=2, variant="ind", kappa=0.7),
              "cor-entropy-summed-prior": dict(num_envs=1, variant="cor", kappa=0.7, ent_coef=0.05, xi=0.3,
                                               hyperprior_reduction="sum"),
              "mean-prior-once": dict(num_envs=2, variant="mean", kappa=0.0, hyperprior_reduction="once"),
              "ind-no-ucb-in-returns-mse": dict(num_envs=2, variant="ind", kappa=0.7, ucb_in_returns=False,
                                                critic_loss="mse"),
              "cor-raw-advantages-joint": dict(num_envs=2, variant="cor", kappa=1.5, norm_adv=False,
                                               joint_optimizer=True)}
REFERENCE_CASES = [pytest.param(changes, id=f"eppo-{name}") for name, changes in EPPO_CASES.items()]


@pytest.mark.parametrize("changes", REFERENCE_CASES)
def test_batch_advantages_and_targets_equal_the_reference(changes):
    """compute_advantages: the UCB advantages before and after normalization, the targets (with or without the
    bonus), the values and the old log-probabilities, each seed's its own
    (reference_math.assert_batch_equals_the_reference)."""
    reference_math.assert_batch_equals_the_reference(eppo_continuous, changes)


@pytest.mark.parametrize("changes", REFERENCE_CASES)
def test_losses_equal_the_reference(changes):
    """ppo_loss on the batch, with both networks moved since the rollout: the actor's loss, the critic's Student-t
    NLL and hyperprior terms, and the logged terms (reference_math.assert_losses_equal_the_reference)."""
    reference_math.assert_losses_equal_the_reference(eppo_continuous, changes)


@pytest.mark.parametrize("changes", REFERENCE_CASES)
def test_one_update_step_follows_the_reference_gradients(changes):
    """update with one minibatch: every parameter's gradient is the reference loss's, clipped per seed at
    --max-grad-norm, and the step is Adam's first
    (reference_math.assert_update_step_follows_the_reference_gradients)."""
    reference_math.assert_update_step_follows_the_reference_gradients(eppo_continuous, changes)


@pytest.mark.parametrize("changes", REFERENCE_CASES[:1])
def test_truncation_bootstraps_from_the_final_state_and_termination_does_not(changes):
    """Moving the final state of a truncated episode moves the advantages before it; moving a terminal state moves
    nothing, neither its value nor its variance
    (reference_math.assert_truncation_bootstraps_and_termination_does_not)."""
    reference_math.assert_truncation_bootstraps_and_termination_does_not(eppo_continuous, changes)


def test_no_eppo_core_function_names_a_study_switch():
    """The method's core (every function or class whose name holds nig, gae, ucb or evidential) takes no open
    choice's flag and branches on none: the readings are chosen in the open-choices block (CRITIC_LOSSES, ...)."""
    import inspect

    switches = ("critic_loss", "hyperprior_terms", "critic_grad_clip", "hyperprior_reduction", "evidence_init",
                "evidence_transform", "ucb_in_returns", "terms", "transform", "init_modes", "nll-mse-omega",
                "algorithm1", "prior-mode")
    core = [(name, value) for name, value in vars(eppo_continuous).items()
            if re.search("nig|gae|ucb|evidential", name, re.IGNORECASE) and callable(value)
            and getattr(value, "__module__", None) == "eppo_continuous"]
    assert {"nig_nll", "nig_log_hyperprior", "probabilistic_gae", "ucb_advantages", "evidential_critic_loss",
            "EvidentialCritic"} <= {name for name, _ in core}
    for name, value in core:
        source = inspect.getsource(value)
        found = [switch for switch in switches if re.search(rf"\b{re.escape(switch)}\b", source)]
        assert not found, f"{name} names {found}"
