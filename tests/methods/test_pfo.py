"""Tests for pfo_continuous.py: PFO's feature trust region (Moalla et al., 2024), the script, and its batch and loss
against the independent reference of tests/reference_math.py."""

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import pfo_continuous as pfo
import reference_math as ref
from tiny_run import TINY_EVALUATION_STEPS, read_csv, run_script

OBS_DIM, ACTION_DIM, HIDDEN = 5, 2, 16


def generators(*seeds):
    return [torch.Generator().manual_seed(seed) for seed in seeds]


def test_penalty_is_the_unit_mean_then_batch_mean_of_squared_differences():
    features = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    old_features = torch.tensor([[0.0, 0.0], [0.0, 3.0]])
    # rows: (1 + 4) / 2 = 2.5 and (0 + 9) / 2 = 4.5; batch mean 3.5
    assert pfo.feature_trust_region_penalty(features, old_features).item() == 3.5


def test_penalty_is_per_seed_over_its_own_minibatch():
    """With a leading seed axis the penalty is one value per seed, each that seed's own unit-then-sample mean:
    nothing is averaged over seeds, and a seed's value does not change with the seeds beside it."""
    torch.manual_seed(0)
    features, old_features = torch.randn(3, 32, 16), torch.randn(3, 32, 16)
    old_features[1] = features[1]  # seed 1 has not moved
    penalty = pfo.feature_trust_region_penalty(features, old_features)
    assert penalty.shape == (3,) and penalty[1].item() == 0 and (penalty[[0, 2]] > 0).all()
    for k in range(3):
        assert torch.equal(penalty[k], pfo.feature_trust_region_penalty(features[k], old_features[k]))
    torch.testing.assert_close(penalty, (features - old_features).pow(2).mean(dim=(1, 2)))
    # the summed loss (as the script backpropagates it) gives each seed the gradient of its own penalty only
    features.requires_grad_(True)
    pfo.feature_trust_region_penalty(features, old_features).sum().backward()
    assert features.grad[1].abs().max().item() == 0
    torch.testing.assert_close(features.grad[0], 2 * (features[0] - old_features[0]).detach() / (32 * 16))


def test_preactivation_features_are_the_last_layernorm_output_and_give_the_same_mean():
    torch.manual_seed(0)
    actor = pfo.Actor(OBS_DIM, ACTION_DIM, dataclasses.replace(pfo.Args(), hidden_dim=HIDDEN), generators(1, 2))
    x = torch.randn(2, 32, OBS_DIM)  # (seeds, samples, obs_dim)
    preactivation = actor.preactivation_features(x)
    assert isinstance(actor.trunk[-2], pfo.StackedLayerNorm) and isinstance(actor.trunk[-1], torch.nn.ReLU)
    assert preactivation.shape == (2, 32, HIDDEN)
    assert torch.equal(preactivation, actor.trunk[-2](actor.trunk[:-2](x)))
    assert torch.equal(torch.relu(preactivation), actor.features(x))
    assert torch.equal(actor.mean_from_preactivation(preactivation), actor(x))  # bit-identical to PPO's forward
    assert (preactivation < 0).any()  # pre-activations, not the (non-negative) ReLU outputs


def test_penalty_is_zero_with_zero_gradient_on_the_first_minibatch_and_positive_after_a_step():
    """As the script: old features from one batched pass over the rollout, each seed's own minibatch gathered
    from them. Moving only seed 0's actor moves only seed 0's features."""
    torch.manual_seed(0)
    actor = pfo.Actor(OBS_DIM, ACTION_DIM, dataclasses.replace(pfo.Args(), hidden_dim=HIDDEN), generators(1, 2))
    optimizer = pfo.SeedwiseAdam(actor.parameters(), lr=1e-2)
    rollout_obs = torch.randn(2, 64, OBS_DIM)
    with torch.no_grad():
        old_features = actor.preactivation_features(rollout_obs)
    seed_rows = torch.arange(2)[:, None]
    minibatch = torch.stack([torch.arange(0, 64, 4), torch.arange(1, 64, 4)])  # each seed's own samples

    def penalty():
        return pfo.feature_trust_region_penalty(actor.preactivation_features(rollout_obs[seed_rows, minibatch]),
                                                old_features[seed_rows, minibatch])

    first = penalty()
    assert first.shape == (2,) and first.max().item() <= 1e-12  # batched and minibatch passes agree to rounding
    optimizer.zero_grad()
    first.sum().backward()
    assert all(p.grad is None or p.grad.abs().max() <= 1e-6 for p in actor.parameters())  # None: not in the penalty

    optimizer.zero_grad()
    actor(rollout_obs[seed_rows, minibatch]).pow(2).mean(dim=(1, 2)).sum().backward()  # any step that moves the trunk
    optimizer.step(np.array([True, False]))  # seed 0 only
    moved = penalty()
    assert moved[0].item() > 0 and moved[1].item() <= 1e-12
    # and its gradient pulls seed 0's features back towards the rollout policy's
    optimizer.zero_grad()
    moved.sum().backward()
    with torch.no_grad():
        for p in actor.parameters():
            if p.grad is not None:  # the mean head and log-std are not in the penalty
                p -= 1e-2 * p.grad
    assert penalty()[0].item() < moved[0].item()


def test_penalty_and_gradient_are_finite_for_extreme_features():
    features = torch.tensor([[1e15, -1e15, 0.0], [1e-30, 0.0, 3.0]], requires_grad=True)
    old_features = torch.tensor([[-1e15, 1e15, 0.0], [0.0, 0.0, 3.0]])
    penalty = pfo.feature_trust_region_penalty(features, old_features)
    penalty.backward()
    assert math.isfinite(penalty.item()) and torch.isfinite(features.grad).all()


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_bad_feature_coef_is_rejected_naming_the_flag(value):
    # the script turns this ValueError into exit code 2 (tests/plumbing/test_all_scripts.py checks that path)
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
    """--feature-coef 0 leaves only the split forward pass, which is bit-identical: identical evaluations to PPO,
    for both seeds of a two-seed group."""
    flags = ("--feature-coef", "0", "--num-seeds", "2")
    pfo_run = run_script("pfo_continuous.py", tmp_path / "pfo" / "seed{seed}", *flags)
    ppo_run = run_script("ppo_continuous.py", tmp_path / "ppo" / "seed{seed}", *flags[2:])
    assert pfo_run.returncode == 0 and ppo_run.returncode == 0, (pfo_run.stderr[-2000:], ppo_run.stderr[-2000:])
    for seed in (1, 2):
        with (open(tmp_path / "pfo" / f"seed{seed}" / "evaluations.csv") as a,
              open(tmp_path / "ppo" / f"seed{seed}" / "evaluations.csv") as b):
            assert a.read() == b.read()


# ---- Against the independent reference (tests/reference_math.py): PFO's batch and loss ----
#
# The rollout policy's pre-activation features in the batch, and the actor's loss = the clipped surrogate (written
# case by case) - ent_coef x entropy + feature_coef x mean over samples of the mean over units of (phi - phi_old)^2.


def test_pfo_batch_features_and_actor_loss_with_its_feature_penalty():
    run = ref.make_run(pfo, feature_coef=3.0)
    rollout = ref.hand_built_rollout()
    batch = pfo.compute_advantages(run, rollout, run.args)
    old_actor = copy.deepcopy(run.agent.actor)
    for k in range(2):
        reference = ref.reference_ppo_batch(run, rollout, k)
        ref.close(batch["advantages"][k], ref.normalized(reference["advantages"]))
        ref.close(batch["returns"][k], reference["returns"])
        ref.close(batch["old_log_probs"][k], reference["old_log_probs"])
        # the features the penalty keeps close: the rollout policy's last LayerNorm output, before the ReLU
        features = ref.np_network(old_actor, k, rollout.obs[k].double().numpy())["preactivation"]
        assert (features < 0).any()
        ref.close(batch["old_features"][k], features)

    ref.perturb(run.agent.actor, 11, 0.01)
    ref.perturb(run.agent.actor.trunk, 13, 0.2)  # the features move more than the (small-gain) mean head shows
    mb, index = ref.minibatch(pfo, batch)
    losses, stats = pfo.ppo_loss(run.agent, mb, run.args)
    for k in range(2):
        obs, actions = rollout.obs[k, index[k]].double().numpy(), rollout.actions[k, index[k]].double().numpy()
        reference = ref.reference_ppo_batch(run, rollout, k)
        new_log_probs = ref.np_log_prob(run.agent.actor, k, obs, actions)
        old_log_probs = ref.np_log_prob(old_actor, k, obs, actions)
        ref.assert_both_clip_cases(new_log_probs, old_log_probs, run.args.clip_coef)
        surrogate = ref.reference_surrogate(new_log_probs, old_log_probs,
                                            ref.normalized(reference["advantages"])[index[k]], run.args.clip_coef)
        moved = (ref.np_network(run.agent.actor, k, obs)["preactivation"]
                 - ref.np_network(old_actor, k, obs)["preactivation"])
        penalty = np.mean([np.mean(row**2) for row in moved])  # per sample over units, then over the minibatch
        assert run.args.feature_coef * penalty > 0.1  # the term is far above the tolerance
        ref.close(stats["feature_distance"][k], penalty)
        ref.close(losses["actor"][k], surrogate - run.args.ent_coef * ref.np_entropy(run.agent.actor, k)
                  + run.args.feature_coef * penalty)
        values = ref.np_network(run.agent.critic, k, obs)["head"][:, 0]
        ref.close(losses["critic"][k], np.mean((values - reference["returns"][index[k]]) ** 2))
