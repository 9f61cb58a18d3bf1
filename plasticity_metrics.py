"""Plasticity metrics of the EPPO paper (Section 4, "Plasticity preservation analysis"; Appendix
"Plasticity preservation analysis").

Pure functions on torch tensors that return Python numbers. The algorithm scripts call them at step 0
and at the end of every task for the critic and the actor (plasticity.csv columns effective_rank and
stable_rank of the penultimate-layer features, dormant_percent over all hidden layers).
``max_abs_gradient`` is the paper's gradient diagnostic for one network; the scripts log the same quantity
per seed from their optimizer (``SeedwiseAdam.max_abs_gradients``, ``plasticity/critic_max_abs_grad``), and
the tests hold the two equal. Computations run in float64 on the tensor's own device; each rank costs one
SVD (torch.linalg.svdvals).

Degenerate-input conventions (chosen so that no metric returns NaN for finite input):
- a matrix without any non-zero singular value (all-zero features) has effective rank 0.0 and
  stable rank 0.0: it spans no direction;
- a single non-zero sample (one row) has exactly one non-zero singular value: both ranks are 1.0;
- features or activations containing NaN/inf give NaN for the ranks (the quantity is undefined and
  a training run must not crash at a task end because of it); the dormant percentages treat a
  non-finite activation as "not below the threshold".
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

# The explained-variance ratio of stable_rank must exceed 1 - delta by more than this fraction of
# delta. float64 SVD round-off on the singular values is ~1e-16 relative to the largest one, far
# below this margin, so a ratio that equals 1 - delta exactly (up to round-off) is reported as "not
# exceeding", as the strict inequality of the definition says, on every platform.
_STABLE_RANK_REL_TOL = 1e-8


def _singular_values(features: torch.Tensor) -> torch.Tensor | None:
    """Singular values (descending, float64, on features' device) of a 2-D feature matrix;
    None if the matrix contains NaN/inf."""
    if not isinstance(features, torch.Tensor):
        raise TypeError(f"features must be a torch.Tensor, got {type(features).__name__}")
    if features.ndim != 2:
        raise ValueError(
            f"features must be a 2-D (samples x features) matrix, got shape {tuple(features.shape)}"
        )
    if features.shape[0] == 0 or features.shape[1] == 0:
        raise ValueError(f"features must be non-empty, got shape {tuple(features.shape)}")
    features = features.detach().to(torch.float64)
    if not torch.isfinite(features).all():
        return None
    return torch.linalg.svdvals(features)


def effective_rank(features: torch.Tensor) -> float:
    """Effective rank of a feature matrix (Roy & Vetterli, 2007; EPPO paper, Appendix
    "Plasticity preservation analysis").

    With the singular values sigma_k of the (n x m) matrix Phi, p_k = sigma_k / ||sigma||_1 and
    effective rank(Phi) = exp(H(p)), H(p) = -sum_k p_k log p_k, using 0 log 0 = 0 (the paper sums
    over q = max(n, m) values; the ones beyond min(n, m) are zero and contribute nothing).

    Returns 0.0 for an all-zero matrix (no non-zero singular value), NaN if features contain
    NaN/inf. Values lie in [1, min(n, m)] otherwise; equal singular values give exactly their count.
    """
    sigma = _singular_values(features)
    if sigma is None:
        return float("nan")
    if sigma[0] <= 0:
        return 0.0
    sigma = sigma / sigma[0]  # p is scale-invariant; this keeps the sum finite for huge features
    p = sigma / sigma.sum()
    p = p[p > 0]  # 0 log 0 = 0
    entropy = -(p * torch.log(p)).sum()
    return float(torch.exp(entropy).item())


def stable_rank(features: torch.Tensor, delta: float = 0.01) -> float:
    """Stable rank of a feature matrix as defined in the EPPO paper (Appendix "Plasticity
    preservation analysis", citing Yang et al., 2019):

        stable rank(Phi) = min { k : (sum_{i<=k} sigma_i^2) / (sum_j sigma_j^2) > 1 - delta },

    singular values sorted in descending order, delta = 0.01 in the paper ("captures at least 99%
    of the total variance"). The condition is evaluated as tail_k < delta * total with the tail
    sum_{i>k} sigma_i^2 accumulated directly (no 1 - ratio cancellation), in float64, with a
    relative margin of 1e-8 * delta so that a ratio sitting exactly on the boundary is, as the
    strict inequality requires, not counted as exceeding it despite SVD round-off.

    Returns an integer-valued float: 0.0 for an all-zero matrix, NaN if features contain NaN/inf.
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    sigma = _singular_values(features)
    if sigma is None:
        return float("nan")
    if sigma[0] <= 0:
        return 0.0
    # Scale by the largest singular value first: the ratio is scale-invariant, and squaring
    # features of magnitude ~1e160 (float64 input) would otherwise overflow.
    sigma_sq = (sigma / sigma[0]) ** 2
    total = sigma_sq.sum()
    # suffix[j] = sum_{i >= j} sigma_i^2, so the energy left out when keeping k = j + 1 values is suffix[j + 1].
    suffix = torch.flip(torch.cumsum(torch.flip(sigma_sq, dims=[0]), dim=0), dims=[0])
    tail = torch.cat([suffix[1:], suffix.new_zeros(1)])
    exceeds = tail < delta * total * (1.0 - _STABLE_RANK_REL_TOL)
    # The last entry of tail is 0 < delta * total, so at least one k qualifies.
    return float(torch.nonzero(exceeds)[0, 0].item() + 1)


def _activation_layers(
    activations: torch.Tensor | Sequence[torch.Tensor],
) -> list[torch.Tensor]:
    """Validate one activation tensor or a list of them; return float64 (batch..., units) tensors."""
    layers = [activations] if isinstance(activations, torch.Tensor) else list(activations)
    if not layers:
        raise ValueError("activations must be a tensor or a non-empty list of tensors")
    checked = []
    for index, layer in enumerate(layers):
        if not isinstance(layer, torch.Tensor):
            raise TypeError(f"activations[{index}] must be a torch.Tensor, got {type(layer).__name__}")
        if layer.ndim < 2 or layer.numel() == 0:
            raise ValueError(
                f"activations[{index}] must be a non-empty (batch, units) tensor with units on the last "
                f"axis, got shape {tuple(layer.shape)}"
            )
        checked.append(layer.detach().to(torch.float64).reshape(-1, layer.shape[-1]))
    return checked


def dormant_unit_percentage(
    activations: torch.Tensor | Sequence[torch.Tensor], threshold: float = 0.01
) -> float:
    """Dormant unit percentage as defined in the EPPO paper (Appendix "Plasticity preservation
    analysis"): a unit is dormant if its post-nonlinearity output magnitude |a| stays below
    `threshold` (0.01 in the paper, strict <) for every sample of the batch.

    activations: a (batch, units) tensor, or a list of them (one per layer); any leading axes are
    treated as samples. Returns 100 * dormant units / all units, over all layers together.
    """
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    layers = _activation_layers(activations)
    dormant = sum(int((layer.abs() < threshold).all(dim=0).sum().item()) for layer in layers)
    units = sum(layer.shape[1] for layer in layers)
    return 100.0 * dormant / units


def tau_dormant_unit_percentage(
    activations: torch.Tensor | Sequence[torch.Tensor], tau: float = 0.0
) -> float:
    """Percentage of tau-dormant units (Sokar et al., 2023, "The Dormant Neuron Phenomenon in
    Deep Reinforcement Learning", Section 3).

    Unit i of a layer with H units has score s_i = E_x|a_i(x)| / ((1/H) sum_k E_x|a_k(x)|) (batch
    mean of |activation| normalised by the layer's mean over units) and is tau-dormant if
    s_i <= tau. Default tau = 0.0, the default threshold of the authors' code (dopamine/labs/redo,
    BaseRecycler.dead_neurons_threshold); their recycling experiments also use positive tau such as
    0.025 or 0.1. With ReLU (this repository's networks) tau = 0 counts the units that output
    exactly zero on the whole batch; the EPPO paper's own metric is dormant_unit_percentage.

    A layer whose activations are all zero has no normalising mean; all its units count as
    dormant (score 0), as in the authors' code, which adds 1e-9 to the denominator.
    activations: a (batch, units) tensor or a list of them; percentage over all units of all layers.
    """
    if tau < 0:
        raise ValueError(f"tau must be >= 0, got {tau}")
    layers = _activation_layers(activations)
    dormant = 0
    for layer in layers:
        unit_score = layer.abs().mean(dim=0)
        layer_mean = unit_score.mean()
        if layer_mean > 0:
            unit_score = unit_score / layer_mean
        dormant += int((unit_score <= tau).sum().item())
    units = sum(layer.shape[1] for layer in layers)
    return 100.0 * dormant / units


def max_abs_gradient(module: torch.nn.Module) -> float:
    """Largest absolute gradient entry over the module's parameters (the "maximum absolute
    gradient" diagnostic of the EPPO paper's Appendix figures). 0.0 when no parameter has a
    gradient; inf/NaN gradients propagate into the result."""
    # one concatenation and one reduction (the scripts take the same maximum per seed in their plumbing,
    # SeedwiseAdam.max_abs_gradients, whose tests compare it with this one)
    grads = [p.grad.detach().reshape(-1) for p in module.parameters() if p.grad is not None and p.grad.numel()]
    if not grads:
        return 0.0
    return float(torch.cat(grads).abs().max().item())
