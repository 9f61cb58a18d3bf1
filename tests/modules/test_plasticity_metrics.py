"""Tests of plasticity_metrics.py against closed forms and hand computations."""

import math

import pytest
import torch

from plasticity_metrics import (
    dormant_unit_percentage,
    effective_rank,
    max_abs_gradient,
    stable_rank,
    tau_dormant_unit_percentage,
)


def matrix_with_singular_values(singular_values, n_rows, n_cols, seed=0):
    """U diag(s) V^T (float64) with random orthonormal U (n_rows x r) and V (n_cols x r)."""
    generator = torch.Generator().manual_seed(seed)
    s = torch.tensor(singular_values, dtype=torch.float64)
    rank = len(singular_values)
    u, _ = torch.linalg.qr(torch.randn(n_rows, rank, generator=generator, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(n_cols, rank, generator=generator, dtype=torch.float64))
    return u @ torch.diag(s) @ v.T


# ---------------------------------------------------------------- effective rank


@pytest.mark.parametrize("n_rows, n_cols, scale", [(6, 6, 1.0), (40, 5, 1.0), (5, 40, 3.7), (64, 16, 1e-3)])
def test_effective_rank_of_equal_singular_values_is_the_rank(n_rows, n_cols, scale):
    # Orthonormal columns/rows: all min(n, m) singular values equal -> uniform p -> exp(H) = min(n, m).
    rank = min(n_rows, n_cols)
    features = matrix_with_singular_values([scale] * rank, n_rows, n_cols)
    assert effective_rank(features) == pytest.approx(rank, rel=1e-9)


def test_effective_rank_of_rank_one_matrix_is_one():
    u = torch.linspace(-1.0, 2.0, 30)
    v = torch.tensor([0.5, -1.0, 3.0, 0.0, 2.0])
    assert effective_rank(torch.outer(u, v)) == pytest.approx(1.0, abs=1e-6)


def test_effective_rank_matches_hand_computed_entropy():
    # s = (3, 1): p = (3/4, 1/4), exp(H) = (3/4)^(-3/4) * (1/4)^(-1/4) = 1.7547654...
    features = matrix_with_singular_values([3.0, 1.0], 10, 4)
    expected = 0.75**-0.75 * 0.25**-0.25
    assert expected == pytest.approx(1.7547654, abs=1e-6)
    assert effective_rank(features) == pytest.approx(expected, rel=1e-9)


def test_effective_rank_is_float64_regardless_of_input_dtype():
    features = matrix_with_singular_values([2.0, 1.0, 0.5], 50, 8, seed=3)
    from_float32 = effective_rank(features.float())
    from_float64 = effective_rank(features)
    assert isinstance(from_float32, float)
    assert from_float32 == pytest.approx(from_float64, rel=1e-6)


# ---------------------------------------------------------------- stable rank


# Squared singular values (summing to 1) and their cumulative ratios 0.5, 0.8, 0.95, 1.0.
ENERGY = [0.5, 0.3, 0.15, 0.05]


@pytest.mark.parametrize(
    "delta, expected",
    [
        (0.01, 4),  # needs ratio > 0.99: only k = 4 (1.0)
        (0.1, 3),  # ratio > 0.9: k = 3 (0.95)
        (0.2, 3),  # boundary: ratio at k = 2 is exactly 0.8, not > 0.8 -> k = 3
        (0.25, 2),  # ratio > 0.75: k = 2 (0.8)
        (0.5, 2),  # boundary: ratio at k = 1 is exactly 0.5, not > 0.5 -> k = 2
        (0.6, 1),  # ratio > 0.4: k = 1 (0.5)
    ],
)
def test_stable_rank_with_known_singular_values(delta, expected):
    features = matrix_with_singular_values([math.sqrt(e) for e in ENERGY], 32, 12)
    assert stable_rank(features, delta=delta) == expected


def test_stable_rank_paper_threshold_boundary():
    # delta = 0.01 (paper): energy (0.99, 0.01) sits exactly on 1 - delta at k = 1 -> 2;
    # energy (0.995, 0.005) exceeds it at k = 1 -> 1.
    on_boundary = matrix_with_singular_values([math.sqrt(0.99), math.sqrt(0.01)], 20, 7)
    above = matrix_with_singular_values([math.sqrt(0.995), math.sqrt(0.005)], 20, 7)
    assert stable_rank(on_boundary) == 2.0
    assert stable_rank(above) == 1.0


def test_stable_rank_ignores_round_off_singular_values_of_rank_deficient_matrix():
    # Rank 2 in a 30 x 10 matrix: the 8 remaining singular values are round-off (~1e-16).
    features = matrix_with_singular_values([2.0, 1.0], 30, 10)
    assert stable_rank(features, delta=1e-6) == 2.0


def test_stable_rank_rejects_delta_outside_unit_interval():
    features = torch.eye(3)
    for delta in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="delta"):
            stable_rank(features, delta=delta)


# ---------------------------------------------------------------- dormant units


def planted_activations():
    """64 x 8 activations; units 1, 4, 6 dormant at threshold 0.01, the rest not."""
    generator = torch.Generator().manual_seed(0)
    activations = torch.randn(64, 8, generator=generator, dtype=torch.float64) + 0.5
    activations[:, 0] = 0.02  # constant but above threshold: not dormant
    activations[:, 1] = 0.0
    activations[:, 4] = 0.0
    activations[:, 6] = 0.005 * torch.sign(torch.randn(64, generator=generator, dtype=torch.float64))
    activations[:, 7] = 0.001
    activations[17, 7] = -0.02  # one sample above threshold in magnitude: not dormant
    return activations


def test_dormant_unit_percentage_counts_planted_dead_units():
    assert dormant_unit_percentage(planted_activations()) == pytest.approx(100.0 * 3 / 8)


def test_dormant_unit_percentage_threshold_is_strict():
    # |a| == threshold for every sample is not "below" the threshold.
    activations = torch.full((5, 4), 0.01, dtype=torch.float64)
    assert dormant_unit_percentage(activations, threshold=0.01) == 0.0
    assert dormant_unit_percentage(activations, threshold=0.0100001) == 100.0


def test_dormant_unit_percentage_over_several_layers():
    second_layer = torch.ones(64, 4, dtype=torch.float64)
    second_layer[:, 2] = 0.0
    # (3 + 1) dormant units of (8 + 4).
    value = dormant_unit_percentage([planted_activations(), second_layer])
    assert value == pytest.approx(100.0 * 4 / 12)


def tau_layer():
    """4 x 4 activations with hand-computed Sokar scores.

    Batch means of |a|: unit0 = (0.03 + 0.01 + 0 + 0.02) / 4 = 0.015, unit1 = 1.0,
    unit2 = (2 + 3 + 1 + 0) / 4 = 1.5, unit3 = 0. Layer mean = 2.515 / 4 = 0.62875.
    Scores: 0.015 / 0.62875 = 0.023857, 1.5905, 2.3857, 0.
    """
    return torch.tensor(
        [[0.03, 1.0, 2.0, 0.0], [-0.01, -1.0, 3.0, 0.0], [0.0, 1.0, -1.0, 0.0], [0.02, -1.0, 0.0, 0.0]],
        dtype=torch.float64,
    )


@pytest.mark.parametrize("tau, expected", [(0.0, 25.0), (0.02, 25.0), (0.025, 50.0), (1.6, 75.0), (2.4, 100.0)])
def test_tau_dormant_unit_percentage_matches_hand_computation(tau, expected):
    assert tau_dormant_unit_percentage(tau_layer(), tau=tau) == pytest.approx(expected)


def test_tau_dormant_over_layers_and_all_zero_layer():
    # tau = 0: 1 dormant unit of 4, plus both units of an all-zero layer -> 3 of 6.
    zero_layer = torch.zeros(4, 2, dtype=torch.float64)
    assert tau_dormant_unit_percentage([tau_layer(), zero_layer]) == pytest.approx(50.0)


@pytest.mark.parametrize("bad", [torch.zeros(5), torch.zeros(0, 3), [], [torch.zeros(3, 2), "x"]])
def test_dormant_percentages_reject_bad_activations(bad):
    with pytest.raises((ValueError, TypeError)):
        dormant_unit_percentage(bad)
    with pytest.raises((ValueError, TypeError)):
        tau_dormant_unit_percentage(bad)


# ---------------------------------------------------------------- gradients


def test_max_abs_gradient_matches_closed_form():
    # L = 0.5 * ||W x + b - y||^2 with W = [[1, 0, 0], [0, 1, 0]], b = 0, x = (1, -2, 3), y = 0:
    # residual r = (1, -2); dL/dW = r x^T = [[1, -2, 3], [-2, 4, -6]]; dL/db = r. Max |grad| = 6.
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
        layer.bias.zero_()
    x = torch.tensor([1.0, -2.0, 3.0])
    loss = 0.5 * (layer(x) ** 2).sum()
    loss.backward()
    assert max_abs_gradient(layer) == pytest.approx(6.0)


def test_max_abs_gradient_without_gradients_is_zero():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    assert max_abs_gradient(module) == 0.0
    # Only the parameters that have a gradient count.
    module[2].bias.grad = torch.tensor([-2.5])
    assert max_abs_gradient(module) == 2.5


# ---------------------------------------------------------------- degenerate and extreme inputs


def test_degenerate_inputs_give_documented_finite_values():
    zeros = torch.zeros(16, 8)
    assert effective_rank(zeros) == 0.0
    assert stable_rank(zeros) == 0.0
    assert dormant_unit_percentage(zeros) == 100.0
    assert tau_dormant_unit_percentage(zeros) == 100.0

    one_sample = torch.tensor([[0.3, -1.0, 0.0, 2.0]])
    assert effective_rank(one_sample) == pytest.approx(1.0)
    assert stable_rank(one_sample) == 1.0
    assert dormant_unit_percentage(one_sample) == 25.0
    assert effective_rank(torch.zeros(1, 4)) == 0.0
    assert stable_rank(torch.zeros(1, 4)) == 0.0


@pytest.mark.parametrize("scale", [1e-30, 1e30])
def test_ranks_are_scale_invariant_for_extreme_magnitudes(scale):
    features = matrix_with_singular_values([math.sqrt(e) for e in ENERGY], 32, 12).float()
    reference_effective = effective_rank(features)
    reference_stable = stable_rank(features, delta=0.1)
    scaled = features * scale
    assert math.isfinite(effective_rank(scaled))
    assert effective_rank(scaled) == pytest.approx(reference_effective, rel=1e-5)
    assert stable_rank(scaled, delta=0.1) == reference_stable


def test_non_finite_features_give_nan_not_an_exception():
    features = torch.ones(4, 3)
    features[1, 2] = float("nan")
    assert math.isnan(effective_rank(features))
    assert math.isnan(stable_rank(features))
    features[1, 2] = float("inf")
    assert math.isnan(effective_rank(features))


def test_features_must_be_a_non_empty_matrix():
    for bad in (torch.zeros(5), torch.zeros(2, 3, 4), torch.zeros(0, 3)):
        with pytest.raises(ValueError, match="features"):
            effective_rank(bad)
        with pytest.raises(ValueError, match="features"):
            stable_rank(bad)
