"""Tests of ppo_drnd_continuous.py: the DRND bonus, networks and predictor loss, and a tiny run's DRND state.

The end-to-end properties shared by every script (evaluation protocol, reproducibility, preemption, bad input of
the common flags) are in test_all_scripts.py; here only what DRND adds.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import ppo_drnd_continuous as drnd
from tiny_run import REPO_ROOT, TINY_EVALUATION_STEPS, read_csv, run_script

SCRIPT = "ppo_drnd_continuous.py"
DRND_FLAGS = ["--num-targets", "--drnd-alpha", "--drnd-learning-rate", "--drnd-update-proportion", "--int-gamma",
              "--ext-coef", "--int-coef"]


def numpy_drnd_bonus(predicted, targets, alpha):
    """Direct float64 evaluation of b = alpha sum_d (f - mu)^2 + (1 - alpha) mean_d sqrt(clip(y, 1e-3, 1)) with
    y = |f^2 - mu^2| / (B2 - mu^2), mu = mean_i c_i, B2 = mean_i c_i^2 (Yang et al., 2024; clip and feature mean
    from the authors' online/agents.py)."""
    predicted, targets = predicted.astype(np.float64), targets.astype(np.float64)
    mu = targets.mean(axis=0)
    second_moment = (targets**2).mean(axis=0)
    b1 = ((predicted - mu) ** 2).sum(axis=-1)
    b2 = np.sqrt(np.clip(np.abs(predicted**2 - mu**2) / (second_moment - mu**2), 1e-3, 1.0)).mean(axis=-1)
    return alpha * b1 + (1 - alpha) * b2


def test_bonus_matches_direct_numpy_evaluation():
    rng = np.random.default_rng(0)
    targets = rng.normal(size=(10, 64, 32)).astype(np.float32)
    # predictors near the ensemble mean (ratio below the 1e-3 clip), generic ones, and far ones (ratio above 1)
    predicted = np.concatenate([targets.mean(axis=0)[:16] + 1e-4, rng.normal(size=(32, 32)),
                                rng.normal(scale=10.0, size=(16, 32))]).astype(np.float32)
    ratio = np.abs(predicted**2 - targets.mean(0) ** 2) / targets.var(0)
    assert (ratio < 1e-3).any() and (ratio > 1).any()  # both clip bounds are exercised
    for alpha in (0.9, 0.95, 0.0, 1.0):
        got = drnd.drnd_bonus(torch.from_numpy(predicted), torch.from_numpy(targets), alpha).numpy()
        np.testing.assert_allclose(got, numpy_drnd_bonus(predicted, targets, alpha), rtol=1e-4, atol=1e-6)


def test_bonus_and_predictor_gradient_finite_for_agreeing_targets_and_extreme_inputs():
    torch.manual_seed(0)
    targets = drnd.TargetEnsemble(input_dim=5, num_targets=10)
    predictor = drnd.make_drnd_mlp(5)
    # zero biases: an all-zero input gives all-zero target outputs, so B2 - mu^2 = 0 exactly (0/0 unguarded)
    assert targets(torch.zeros(1, 5)).abs().max() == 0
    for x in (torch.zeros(4, 5), torch.full((4, 5), 1e6), torch.full((4, 5), -1e6)):
        target_features = targets(x)
        predicted = predictor(x)
        assert torch.isfinite(drnd.drnd_bonus(predicted, target_features, 0.9)).all()
        drnd.drnd_predictor_loss(predicted, target_features, torch.arange(4)).backward()
        assert all(torch.isfinite(p.grad).all() for p in predictor.parameters())
        predictor.zero_grad()


def test_target_ensemble_equals_its_member_networks_and_is_frozen():
    torch.manual_seed(3)
    targets = drnd.TargetEnsemble(input_dim=7, num_targets=4)
    torch.manual_seed(3)
    members = [drnd.make_drnd_mlp(7) for _ in range(4)]  # the same init sequence, one network at a time
    x = torch.randn(9, 7)
    features = targets(x)
    assert features.shape == (4, 9, drnd.DRND_FEATURE_DIM)
    for k, member in enumerate(members):
        torch.testing.assert_close(features[k], member(x), rtol=1e-5, atol=1e-5)
    assert list(targets.parameters()) == [] and len(targets.state_dict()) == 8  # 4 layers: weights and biases
    widths = [layer.out_features for layer in members[0] if isinstance(layer, torch.nn.Linear)]
    assert widths == [256, 256, 256, 32]  # EPPO paper, Appendix B


def test_predictor_loss_regresses_each_sample_onto_its_chosen_target():
    target_features = torch.arange(3 * 2 * 4, dtype=torch.float32).reshape(3, 2, 4)
    loss = drnd.drnd_predictor_loss(torch.zeros(2, 4), target_features, torch.tensor([2, 0]))
    want = (target_features[2, 0].pow(2).mean() + target_features[0, 1].pow(2).mean()) / 2
    torch.testing.assert_close(loss, want)


def test_trained_inputs_get_a_smaller_bonus_than_novel_inputs():
    torch.manual_seed(0)
    input_dim, num_targets = 6, 10
    targets = drnd.TargetEnsemble(input_dim, num_targets)
    predictor = drnd.make_drnd_mlp(input_dim)
    optimizer = torch.optim.Adam(predictor.parameters(), lr=3e-4)
    seen = torch.randn(128, input_dim) * 0.5 - 1.0
    novel = torch.randn(128, input_dim) * 0.5 + 3.0
    seen_features = targets(seen)
    with torch.no_grad():
        initial_seen = drnd.drnd_bonus(predictor(seen), seen_features, 0.9).mean()
    for _ in range(200):
        index = torch.randint(num_targets, (seen.shape[0],))
        loss = drnd.drnd_predictor_loss(predictor(seen), seen_features, index)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        bonus_seen = drnd.drnd_bonus(predictor(seen), seen_features, 0.9).mean()
        bonus_novel = drnd.drnd_bonus(predictor(novel), targets(novel), 0.9).mean()
    # seeds 0-2 give bonus_seen/initial ~ 0.015-0.03 and bonus_novel/bonus_seen ~ 130-250
    assert bonus_seen < 0.2 * initial_seen
    assert bonus_novel > 10 * bonus_seen


def test_discounted_bonus_sums_closed_form_and_no_reset():
    bonus = np.array([[1.0, 2.0], [0.0, 1.0], [4.0, 0.0]])
    sums = drnd.discounted_bonus_sums(bonus, np.array([10.0, 0.0]), 0.5)
    # s_t = 0.5 s_{t-1} + b_t from s_{-1} = (10, 0)
    np.testing.assert_allclose(sums, [[6.0, 2.0], [3.0, 2.0], [5.5, 1.0]])


def test_help_lists_the_drnd_flags():
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, SCRIPT), "--help"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    for flag in DRND_FLAGS:
        assert flag in result.stdout, flag


@pytest.mark.parametrize("field, value", [("num_targets", 1), ("drnd_alpha", 1.5), ("drnd_alpha", -0.1),
                                          ("drnd_learning_rate", 0.0), ("drnd_update_proportion", 0.0),
                                          ("int_gamma", 1.0), ("int_coef", -1.0)])
def test_bad_drnd_values_are_rejected_naming_the_flag(field, value):
    """validate_args is what the script runs before anything else (exit code 2 with its message)."""
    drnd.validate_args(drnd.Args(steps_per_task=256, num_tasks=1))  # the defaults are valid
    with pytest.raises(ValueError, match="--" + field.replace("_", "-")):
        drnd.validate_args(drnd.Args(steps_per_task=256, num_tasks=1, **{field: value}))


def test_tiny_run_logs_drnd_and_resumes_its_state_bit_identically(tmp_path):
    """A tiny run logs the DRND tags and checkpoints the DRND state; resuming from an earlier checkpoint (with a
    predictor update still to come) reproduces the final state and evaluations exactly."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    flags = ["--num-steps", "64", "--checkpoint-frequency", "128"]  # updates every 64 steps, checkpoints every 128
    straight = tmp_path / "straight"
    result = run_script(SCRIPT, straight, *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [(int(r["global_step"]), int(r["task"])) for r in read_csv(straight / "evaluations.csv")] == \
        TINY_EVALUATION_STEPS
    events = EventAccumulator(str(straight))
    events.Reload()
    for tag in ("drnd/bonus_mean", "drnd/predictor_loss", "drnd/intrinsic_reward_mean", "losses/value_loss",
                "losses/value_loss_ext", "losses/value_loss_int"):
        values = [event.value for event in events.Scalars(tag)]
        assert len(values) == 7 and np.isfinite(values).all(), tag  # one per update: steps 64, ..., 448
    final = torch.load(straight / "checkpoint.pt", weights_only=False)
    previous = torch.load(straight / "checkpoint.prev.pt", weights_only=False)
    assert previous["global_step"] == 384 and final["global_step"] == 512
    # the update at step 448 trained the predictor and the intrinsic head but left the targets alone
    assert not torch.equal(previous["predictor"]["0.weight"], final["predictor"]["0.weight"])
    assert not torch.equal(previous["critic"]["head_int.weight"], final["critic"]["head_int.weight"])
    assert all(torch.equal(previous["targets"][k], final["targets"][k]) for k in final["targets"])

    # resume the same run directory from its step-384 checkpoint, as if it had died after writing it
    evaluations = (straight / "evaluations.csv").read_text()
    os.remove(straight / "summary.json")
    os.replace(straight / "checkpoint.prev.pt", straight / "checkpoint.pt")
    result = run_script(SCRIPT, straight, *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "from global_step 384" in result.stdout
    assert (straight / "evaluations.csv").read_text() == evaluations
    again = torch.load(straight / "checkpoint.pt", weights_only=False)
    for key in ("actor", "critic", "predictor", "targets"):
        for name, tensor in final[key].items():
            assert torch.equal(tensor, again[key][name]), f"{key}.{name}"
    for key in ("drnd_input_rms", "int_return_rms"):
        for name, value in final[key].items():
            np.testing.assert_array_equal(value, again[key][name], err_msg=f"{key}.{name}")
    np.testing.assert_array_equal(final["int_discounted_sum"], again["int_discounted_sum"])
    for state, state_again in zip(final["predictor_optimizer"]["state"].values(),
                                  again["predictor_optimizer"]["state"].values()):
        assert all(torch.equal(state[k], state_again[k]) for k in state)
