"""Unit tests of ppo_continuous.py's pure functions (GAE, evaluation schedule, normalization, Gaussian policy)."""

import math

import numpy as np
import pytest
import torch

import ppo_continuous as ppo


def brute_force_gae(rewards, values, next_values, terminations, dones, gamma, lam):
    """A_t = sum_l (gamma*lam)^l delta_{t+l}, summed until the episode of step t ends or the buffer does."""
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            total = 0.0
            for l in range(T - t):
                k = t + l
                delta = rewards[k, n] + gamma * (1 - terminations[k, n]) * next_values[k, n] - values[k, n]
                total += (gamma * lam) ** l * delta
                if dones[k, n]:
                    break
            advantages[t, n] = total
    return advantages


def random_rollout(T=40, N=3, seed=0):
    rng = np.random.default_rng(seed)
    rewards, values, next_values = rng.normal(size=(3, T, N))
    terminations = (rng.random((T, N)) < 0.08).astype(float)
    truncations = (rng.random((T, N)) < 0.08).astype(float) * (1 - terminations)
    dones = np.maximum(terminations, truncations)
    assert terminations.any() and truncations.any()
    return rewards, values, next_values, terminations, dones


def test_gae_matches_brute_force_with_terminations_truncations_and_buffer_end():
    rollout = random_rollout()
    expected = brute_force_gae(*rollout, 0.99, 0.95)
    got = ppo.gae(*(torch.tensor(x, dtype=torch.float64) for x in rollout), 0.99, 0.95)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_truncation_bootstraps_from_the_final_observation_and_termination_does_not():
    # One step, episode ends: A = r + gamma * V(final) - V(s) if truncated, r - V(s) if terminated.
    one = lambda v: torch.tensor([[v]], dtype=torch.float64)
    truncated = ppo.gae(one(1.0), one(2.0), one(10.0), one(0.0), one(1.0), 0.9, 0.95)
    terminated = ppo.gae(one(1.0), one(2.0), one(10.0), one(1.0), one(1.0), 0.9, 0.95)
    assert truncated.item() == pytest.approx(1.0 + 0.9 * 10.0 - 2.0)
    assert terminated.item() == pytest.approx(1.0 - 2.0)


def test_evaluation_schedule_of_the_paper():
    steps = ppo.evaluation_steps(500_000, 9, 20_000)
    assert steps[:3] == [0, 20_000, 40_000] and steps[-1] == 4_500_000
    assert len(steps) == 1 + 4_500_000 // 20_000  # 500k is a multiple of 20k: task ends coincide with them
    assert ppo.evaluation_steps(300, 2, 200) == [0, 200, 300, 400, 600]
    assert [ppo.evaluated_task(s, 300) for s in (0, 200, 300, 301, 600)] == [0, 0, 0, 1, 1]


def test_running_mean_std_matches_numpy_over_a_stream():
    rng = np.random.default_rng(1)
    data = rng.normal(3.0, 2.0, size=(500, 4))
    rms = ppo.RunningMeanStd((4,), epsilon=1e-12)
    for start in range(0, 300):  # single rows (the per-step fast path) ...
        rms.update(data[start : start + 1])
    for start in range(300, 500, 50):  # ... then batches
        rms.update(data[start : start + 50])
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-9)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-9)
    clipped = rms.normalize(np.full((1, 4), 1e6), 10.0)
    assert clipped.dtype == np.float32 and np.all(clipped == 10.0)


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    torch.manual_seed(0)
    mean, actions = torch.randn(5, 3), torch.randn(5, 3)
    log_std = torch.randn(3)
    reference = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(ppo.gaussian_log_prob(actions, mean, log_std), reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(ppo.gaussian_entropy(log_std), reference.entropy()[0].sum())


def test_networks_expose_features_and_hidden_activations():
    critic, actor = ppo.Critic(7, 16), ppo.Actor(7, 2, 16)
    x = torch.randn(4, 7)
    for network in (critic, actor):
        activations = network.hidden_activations(x)
        assert len(activations) == 2 and all(a.shape == (4, 16) and (a >= 0).all() for a in activations)
        torch.testing.assert_close(network.features(x), activations[-1])
    torch.testing.assert_close(critic(x), critic.head(critic.features(x)).squeeze(-1))
    assert actor(x).shape == (4, 2) and math.isclose(actor.log_std.sum().item(), 0.0)


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    import importlib
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ppo_continuous.py", "--help"])
    importlib.reload(ppo)  # would parse --help and exit if the script ran on import
    assert list(tmp_path.iterdir()) == []
