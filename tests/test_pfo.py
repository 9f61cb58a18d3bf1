"""Tests for pfo_continuous.py: PFO's feature trust region (Moalla et al., 2024) and the script."""

import dataclasses
import math

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import pfo_continuous as pfo
from tiny_run import TINY_EVALUATION_STEPS, read_csv, run_script

OBS_DIM, ACTION_DIM, HIDDEN = 5, 2, 16


def test_penalty_is_the_unit_mean_then_batch_mean_of_squared_differences():
    features = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    old_features = torch.tensor([[0.0, 0.0], [0.0, 3.0]])
    # rows: (1 + 4) / 2 = 2.5 and (0 + 9) / 2 = 4.5; batch mean 3.5
    assert pfo.feature_trust_region_penalty(features, old_features).item() == 3.5


def test_preactivation_features_are_the_last_layernorm_output_and_give_the_same_mean():
    torch.manual_seed(0)
    actor = pfo.Actor(OBS_DIM, ACTION_DIM, HIDDEN)
    x = torch.randn(32, OBS_DIM)
    preactivation = actor.preactivation_features(x)
    assert isinstance(actor.trunk[-2], torch.nn.LayerNorm) and isinstance(actor.trunk[-1], torch.nn.ReLU)
    assert torch.equal(preactivation, actor.trunk[-2](actor.trunk[:-2](x)))
    assert torch.equal(torch.relu(preactivation), actor.features(x))
    assert torch.equal(actor.mean_from_preactivation(preactivation), actor(x))  # bit-identical to PPO's forward
    assert (preactivation < 0).any()  # pre-activations, not the (non-negative) ReLU outputs


def test_penalty_is_zero_with_zero_gradient_on_the_first_minibatch_and_positive_after_a_step():
    torch.manual_seed(0)
    actor = pfo.Actor(OBS_DIM, ACTION_DIM, HIDDEN)
    optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
    rollout_obs = torch.randn(64, OBS_DIM)
    with torch.no_grad():  # as the script: one batched pass over the whole rollout
        old_features = actor.preactivation_features(rollout_obs)
    minibatch = torch.arange(0, 64, 4)
    penalty = pfo.feature_trust_region_penalty(actor.preactivation_features(rollout_obs[minibatch]),
                                               old_features[minibatch])
    assert penalty.item() <= 1e-12  # the same parameters; batched and minibatch passes agree to rounding
    penalty.backward()
    assert all(p.grad is None or p.grad.abs().max() <= 1e-6 for p in actor.parameters())

    optimizer.zero_grad()
    actor(rollout_obs[minibatch]).pow(2).mean().backward()  # any step that moves the trunk
    optimizer.step()
    moved = pfo.feature_trust_region_penalty(actor.preactivation_features(rollout_obs[minibatch]),
                                             old_features[minibatch])
    assert moved.item() > 0
    # and its gradient pulls the features back towards the rollout policy's
    optimizer.zero_grad()
    moved.backward()
    with torch.no_grad():
        for p in actor.parameters():
            if p.grad is not None:
                p -= 1e-2 * p.grad
    assert pfo.feature_trust_region_penalty(actor.preactivation_features(rollout_obs[minibatch]),
                                            old_features[minibatch]).item() < moved.item()


def test_penalty_and_gradient_are_finite_for_extreme_features():
    features = torch.tensor([[1e15, -1e15, 0.0], [1e-30, 0.0, 3.0]], requires_grad=True)
    old_features = torch.tensor([[-1e15, 1e15, 0.0], [0.0, 0.0, 3.0]])
    penalty = pfo.feature_trust_region_penalty(features, old_features)
    penalty.backward()
    assert math.isfinite(penalty.item()) and torch.isfinite(features.grad).all()


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_bad_feature_coef_is_rejected_naming_the_flag(value):
    # the script turns this ValueError into exit code 2 (tests/test_all_scripts.py checks that path)
    with pytest.raises(ValueError, match="--feature-coef"):
        pfo.validate_args(dataclasses.replace(pfo.Args(), feature_coef=value))


def test_help_lists_the_pfo_flag(tmp_path):
    result = run_script("pfo_continuous.py", tmp_path, "--help", tiny=False, timeout=120)
    assert "--feature-coef" in result.stdout


def test_tiny_run_writes_evaluations_and_the_feature_distance(tmp_path):
    result = run_script("pfo_continuous.py", tmp_path / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [(int(r["global_step"]), int(r["task"])) for r in read_csv(tmp_path / "run" / "evaluations.csv")]
    assert rows == TINY_EVALUATION_STEPS
    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0})
    events.Reload()
    distances = [event.value for event in events.Scalars("pfo/feature_distance")]
    # 3 updates; each averages its minibatch steps, of which all but the first moved away from the rollout policy
    assert len(distances) == 3 and all(math.isfinite(d) and d > 0 for d in distances)


def test_without_the_penalty_pfo_is_ppo(tmp_path):
    """--feature-coef 0 leaves only the split forward pass, which is bit-identical: identical evaluations to PPO."""
    pfo_run = run_script("pfo_continuous.py", tmp_path / "pfo", "--feature-coef", "0")
    ppo_run = run_script("ppo_continuous.py", tmp_path / "ppo")
    assert pfo_run.returncode == 0 and ppo_run.returncode == 0, (pfo_run.stderr[-2000:], ppo_run.stderr[-2000:])
    with open(tmp_path / "pfo" / "evaluations.csv") as a, open(tmp_path / "ppo" / "evaluations.csv") as b:
        assert a.read() == b.read()
