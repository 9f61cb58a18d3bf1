"""Tests of ppo_drnd_continuous.py: the DRND bonus, networks and predictor loss, and a tiny run's DRND state.

The end-to-end properties shared by every script (evaluation protocol, reproducibility, preemption, bad input of
the common flags) are in tests/plumbing/test_all_scripts.py; here only what DRND adds, and its batch and losses
against the independent reference of tests/reference_math.py.
"""

import copy
import math
import os
import sys

import numpy as np
import pytest
import torch

import ppo_drnd_continuous as drnd
import reference_math as ref
from tiny_run import REPO_ROOT, TINY_EVALUATION_STEPS, load_checkpoint_file, read_csv, run_command, run_script

SCRIPT = "ppo_drnd_continuous.py"
DRND_FLAGS = ["--num-targets", "--drnd-alpha", "--drnd-learning-rate", "--drnd-update-proportion", "--int-gamma",
              "--ext-coef", "--int-coef"]


def generators(*seeds):
    return [torch.Generator().manual_seed(seed) for seed in seeds]


def numpy_drnd_bonus(predicted, targets, alpha):
    """Direct float64 evaluation of b = alpha sum_d (f - mu)^2 + (1 - alpha) mean_d sqrt(clip(y, 1e-3, 1)) with
    y = |f^2 - mu^2| / (B2 - mu^2), mu = mean_i c_i, B2 = mean_i c_i^2 (Yang et al., 2024; clip and feature mean
    from the authors' online/agents.py). predicted (B, D), targets (B, K, D)."""
    predicted, targets = predicted.astype(np.float64), targets.astype(np.float64)
    mu = targets.mean(axis=-2)
    second_moment = (targets**2).mean(axis=-2)
    b1 = ((predicted - mu) ** 2).sum(axis=-1)
    b2 = np.sqrt(np.clip(np.abs(predicted**2 - mu**2) / (second_moment - mu**2), 1e-3, 1.0)).mean(axis=-1)
    return alpha * b1 + (1 - alpha) * b2


def test_bonus_matches_direct_numpy_evaluation_per_seed():
    rng = np.random.default_rng(0)
    bonus_inputs = []
    for _ in range(2):  # two seeds
        targets = rng.normal(size=(64, 10, 32)).astype(np.float32)
        # predictors near the ensemble mean (ratio below the 1e-3 clip), generic ones, and far ones (ratio above 1)
        predicted = np.concatenate([targets.mean(axis=1)[:16] + 1e-4, rng.normal(size=(32, 32)),
                                    rng.normal(scale=10.0, size=(16, 32))]).astype(np.float32)
        ratio = np.abs(predicted**2 - targets.mean(1) ** 2) / targets.var(1)
        assert (ratio < 1e-3).any() and (ratio > 1).any()  # both clip bounds are exercised
        bonus_inputs.append((predicted, targets))
    predicted, targets = (torch.from_numpy(np.stack(x)) for x in zip(*bonus_inputs))
    for alpha in (0.9, 0.95, 0.0, 1.0):
        got = drnd.drnd_bonus(predicted, targets, alpha).numpy()
        assert got.shape == (2, 64)
        for k, (predicted_k, targets_k) in enumerate(bonus_inputs):  # each seed from its own features only
            np.testing.assert_allclose(got[k], numpy_drnd_bonus(predicted_k, targets_k, alpha), rtol=1e-4, atol=1e-6)


def test_bonus_and_predictor_gradient_finite_for_agreeing_targets_and_extreme_inputs():
    targets = drnd.TargetEnsemble(input_dim=5, num_targets=10, generators=generators(0))
    predictor = drnd.make_drnd_mlp(5, generators(1))
    # zero biases: an all-zero input gives all-zero target outputs, so B2 - mu^2 = 0 exactly (0/0 unguarded)
    assert targets(torch.zeros(1, 1, 5)).abs().max() == 0
    for x in (torch.zeros(1, 4, 5), torch.full((1, 4, 5), 1e6), torch.full((1, 4, 5), -1e6)):
        target_features = targets(x)
        predicted = predictor(x)
        assert torch.isfinite(drnd.drnd_bonus(predicted, target_features, 0.9)).all()
        drnd.drnd_predictor_loss(predicted, target_features, torch.arange(4)[None]).sum().backward()
        assert all(torch.isfinite(p.grad).all() for p in predictor.parameters())
        predictor.zero_grad()


def test_target_ensemble_equals_its_member_networks_and_is_frozen():
    targets = drnd.TargetEnsemble(input_dim=7, num_targets=4, generators=generators(3, 4))
    gens = generators(3, 4)
    members = [drnd.make_drnd_mlp(7, gens) for _ in range(4)]  # the same init sequence, one network at a time
    x = torch.randn(2, 9, 7, generator=torch.Generator().manual_seed(0))
    features = targets(x)
    assert features.shape == (2, 9, 4, drnd.DRND_FEATURE_DIM)  # (seeds, samples, targets, features)
    for i, member in enumerate(members):
        torch.testing.assert_close(features[:, :, i], member(x), rtol=1e-5, atol=1e-5)
    assert list(targets.parameters()) == [] and len(targets.state_dict()) == 8  # 4 layers: weights and biases
    assert all(buffer.shape[:2] == (2, 4) for buffer in targets.state_dict().values())  # seed axis first
    widths = [layer.weight.shape[1] for layer in members[0] if isinstance(layer, drnd.StackedLinear)]
    assert widths == [256, 256, 256, 32]  # EPPO paper, Appendix B


def test_a_seeds_bonus_networks_do_not_depend_on_the_seeds_beside_it():
    """Seed 4's targets and predictor are drawn from its own generator and compute bit-identical features whether
    it is alone or at position 1 beside seed 3 (CPU; 37 samples put its slices at misaligned offsets)."""
    pair_targets = drnd.TargetEnsemble(7, 3, generators(3, 4))
    pair_predictor = drnd.make_drnd_mlp(7, generators(3, 4))
    alone_targets = drnd.TargetEnsemble(7, 3, generators(4))
    alone_predictor = drnd.make_drnd_mlp(7, generators(4))
    for name, buffer in alone_targets.state_dict().items():
        assert torch.equal(pair_targets.state_dict()[name][1:], buffer), name
    for name, parameter in alone_predictor.state_dict().items():
        assert torch.equal(pair_predictor.state_dict()[name][1:], parameter), name
    assert not torch.equal(pair_targets.weight_0[0], pair_targets.weight_0[1])
    x = torch.randn(2, 37, 7, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(pair_targets(x)[1], alone_targets(x[1:])[0])
        assert torch.equal(pair_predictor(x)[1], alone_predictor(x[1:])[0])
        pair_bonus = drnd.drnd_bonus(pair_predictor(x), pair_targets(x), 0.9)
        alone_bonus = drnd.drnd_bonus(alone_predictor(x[1:]), alone_targets(x[1:]), 0.9)
    assert torch.equal(pair_bonus[1], alone_bonus[0])


def test_predictor_loss_regresses_each_sample_onto_its_chosen_target_per_seed():
    # (samples 2, targets 3, features 4)
    target_features = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    loss = drnd.drnd_predictor_loss(torch.zeros(2, 4), target_features, torch.tensor([2, 0]))
    want = (target_features[0, 2].pow(2).mean() + target_features[1, 0].pow(2).mean()) / 2
    torch.testing.assert_close(loss, want)
    # with a seed axis: each seed's loss is that of its own predictions, features and target choice
    predicted = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(0))
    features = torch.randn(3, 5, 6, 4, generator=torch.Generator().manual_seed(1))
    index = torch.randint(6, (3, 5), generator=torch.Generator().manual_seed(2))
    losses = drnd.drnd_predictor_loss(predicted, features, index)
    assert losses.shape == (3,)
    for k in range(3):
        want = torch.stack([(predicted[k, b] - features[k, b, index[k, b]]).pow(2).mean() for b in range(5)]).mean()
        torch.testing.assert_close(losses[k], want)


def test_trained_inputs_get_a_smaller_bonus_than_novel_inputs():
    input_dim, num_targets = 6, 10
    targets = drnd.TargetEnsemble(input_dim, num_targets, generators(0, 1))
    predictor = drnd.make_drnd_mlp(input_dim, generators(0, 1))
    optimizer = drnd.SeedwiseAdam(predictor.parameters(), lr=3e-4)
    sampling = torch.Generator().manual_seed(0)
    seen = torch.randn(2, 128, input_dim, generator=sampling) * 0.5 - 1.0
    novel = torch.randn(2, 128, input_dim, generator=sampling) * 0.5 + 3.0
    seen_features = targets(seen)
    with torch.no_grad():
        initial_seen = drnd.drnd_bonus(predictor(seen), seen_features, 0.9).mean(-1)
    for _ in range(200):
        index = torch.randint(num_targets, (2, seen.shape[1]), generator=sampling)
        loss = drnd.drnd_predictor_loss(predictor(seen), seen_features, index)
        optimizer.zero_grad()
        loss.sum().backward()
        optimizer.step()
    with torch.no_grad():
        bonus_seen = drnd.drnd_bonus(predictor(seen), seen_features, 0.9).mean(-1)
        bonus_novel = drnd.drnd_bonus(predictor(novel), targets(novel), 0.9).mean(-1)
    # per seed: bonus_seen/initial ~ 0.015-0.03 and bonus_novel/bonus_seen ~ 130-250 (measured before batching)
    assert (bonus_seen < 0.2 * initial_seen).all()
    assert (bonus_novel > 10 * bonus_seen).all()


def test_discounted_bonus_sums_closed_form_and_no_reset():
    bonus = np.array([[1.0, 2.0], [0.0, 1.0], [4.0, 0.0]])
    sums = drnd.discounted_bonus_sums(bonus, np.array([10.0, 0.0]), 0.5)
    # s_t = 0.5 s_{t-1} + b_t from s_{-1} = (10, 0)
    np.testing.assert_allclose(sums, [[6.0, 2.0], [3.0, 2.0], [5.5, 1.0]])
    # (T, seeds, envs): every seed and env is its own filter
    stacked = drnd.discounted_bonus_sums(np.stack([bonus, 2 * bonus], axis=1), np.array([[10.0, 0.0], [0.0, 0.0]]),
                                         0.5)
    np.testing.assert_allclose(stacked[:, 0], sums)
    np.testing.assert_allclose(stacked[:, 1], 2 * drnd.discounted_bonus_sums(bonus, np.zeros(2), 0.5))


def test_help_lists_the_drnd_flags():
    result = run_command([sys.executable, os.path.join(REPO_ROOT, SCRIPT), "--help"], REPO_ROOT, timeout=120)
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


def assert_same_drnd_state(a: dict, b: dict) -> None:
    """Two checkpoints of one seed hold bit-identical networks, DRND statistics and predictor optimizer state."""
    for key in ("actor", "critic", "predictor", "targets"):
        for name, tensor in a[key].items():
            assert torch.equal(tensor, b[key][name]), f"{key}.{name}"
    for key in ("drnd_input_rms", "int_return_rms"):
        for name, value in a[key].items():
            np.testing.assert_array_equal(value, b[key][name], err_msg=f"{key}.{name}")
    np.testing.assert_array_equal(a["int_discounted_sum"], b["int_discounted_sum"])
    for state, state_b in zip(a["predictor_optimizer"]["state"].values(), b["predictor_optimizer"]["state"].values()):
        assert all(torch.equal(state[k], state_b[k]) for k in state)


def test_two_seed_run_logs_drnd_per_seed_and_resumes_its_state_bit_identically(tmp_path):
    """A tiny two-seed run logs the DRND tags and checkpoints each seed's own DRND state (seed axis of length 1);
    seed 2's state equals that of seed 2 trained alone (position 1 vs 0, K = 2 vs 1: the per-seed statistics,
    predictor subsets and target draws); resuming from an earlier checkpoint (with a predictor update still to
    come) reproduces both seeds' final state and evaluations exactly."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    flags = ["--num-steps", "64", "--checkpoint-frequency", "128"]  # updates every 64 steps, checkpoints every 128
    straight = tmp_path / "straight"
    result = run_script(SCRIPT, straight / "seed{seed}", *flags, "--num-seeds", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    final, previous = {}, {}
    for seed in (1, 2):
        run_dir = straight / f"seed{seed}"
        assert [(int(r["global_step"]), int(r["task"])) for r in read_csv(run_dir / "evaluations.csv")] == \
            TINY_EVALUATION_STEPS
        events = EventAccumulator(str(run_dir))
        events.Reload()
        for tag in ("drnd/bonus_mean", "drnd/predictor_loss", "drnd/intrinsic_reward_mean",
                    "drnd/intrinsic_return_std", "losses/value_loss", "losses/value_loss_ext", "losses/value_loss_int"):
            values = [event.value for event in events.Scalars(tag)]
            assert len(values) == 7 and np.isfinite(values).all(), tag  # one per update: steps 64, ..., 448
        final[seed] = load_checkpoint_file(run_dir / "checkpoint.pt")
        previous[seed] = load_checkpoint_file(run_dir / "checkpoint.prev.pt")
        assert previous[seed]["global_step"] == 384 and final[seed]["global_step"] == 512
        # one seed's state: the seed axis has length 1
        assert final[seed]["predictor"]["0.weight"].shape[0] == 1
        assert final[seed]["targets"]["weight_0"].shape[:2] == (1, 10)  # (seeds, targets, ...)
        assert final[seed]["drnd_input_rms"]["mean"].shape == (1, 1, 17 + 6)  # (observation, action)
        assert final[seed]["int_discounted_sum"].shape == (1, 1)  # (seeds, envs)
        # the update at step 448 trained the predictor and the intrinsic head but left the targets alone
        assert not torch.equal(previous[seed]["predictor"]["0.weight"], final[seed]["predictor"]["0.weight"])
        assert not torch.equal(previous[seed]["critic"]["head_int.weight"], final[seed]["critic"]["head_int.weight"])
        assert all(torch.equal(previous[seed]["targets"][k], final[seed]["targets"][k]) for k in final[seed]["targets"])
    # the two seeds have their own bonus networks and statistics
    assert not torch.equal(final[1]["targets"]["weight_0"], final[2]["targets"]["weight_0"])
    assert not np.array_equal(final[1]["int_return_rms"]["var"], final[2]["int_return_rms"]["var"])

    alone = run_script(SCRIPT, tmp_path / "alone" / "seed{seed}", *flags, "--seed", "2")
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert_same_drnd_state(final[2], load_checkpoint_file(tmp_path / "alone" / "seed2" / "checkpoint.pt"))

    # resume the same run directories from their step-384 checkpoints, as if the group had died after writing them
    evaluations = {seed: (straight / f"seed{seed}" / "evaluations.csv").read_text() for seed in (1, 2)}
    for seed in (1, 2):
        os.remove(straight / f"seed{seed}" / "summary.json")
        os.replace(straight / f"seed{seed}" / "checkpoint.prev.pt", straight / f"seed{seed}" / "checkpoint.pt")
    result = run_script(SCRIPT, straight / "seed{seed}", *flags, "--num-seeds", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    for seed in (1, 2):
        assert f"seed{seed} from global_step 384" in result.stdout
        assert (straight / f"seed{seed}" / "evaluations.csv").read_text() == evaluations[seed]
        assert_same_drnd_state(final[seed], load_checkpoint_file(straight / f"seed{seed}" / "checkpoint.pt"))


# ---- Against the independent reference (tests/reference_math.py): the bonus, its scaling, the non-episodic
# intrinsic GAE and the mix ----
#
# The bonus of every (s_t, clipped a_t) standardized by statistics pooled over everything seen, the forward filter of
# bonus sums continued from the previous rollout, the intrinsic reward b_t / std(all sums), the non-episodic intrinsic
# GAE (docs/baselines.md: no termination zeroes V_int(s_{t+1}); an episode end bootstraps from V_int of the final
# observation and stops the recursion), the policy's ext_coef A_ext + int_coef A_int (raw and normalized), both
# heads' returns and squared errors, and the predictor's subset and target draws.


DRND_ARGS = dict(num_targets=3, drnd_alpha=0.7, int_gamma=0.9, ext_coef=2.0, int_coef=0.5)


def pooled(prior_count, prior_mean, prior_var, samples):
    """Count, mean and variance of a prior (count, mean, var) pooled with samples (N, ...): the first two moments of
    the union, directly (not the running update)."""
    count = prior_count + len(samples)
    mean = (prior_count * prior_mean + samples.sum(0)) / count
    second_moment = (prior_count * (prior_var + prior_mean**2) + (samples**2).sum(0)) / count
    return count, mean, second_moment - mean**2


def np_targets(targets, k: int, x: np.ndarray) -> np.ndarray:
    """Seed k's frozen targets on x (samples, in): (samples, targets, features), from the stored weights."""
    outputs = []
    for i in range(targets.weight_0.shape[1]):
        h = x
        for layer in range(targets.num_layers):
            h = h @ getattr(targets, f"weight_{layer}")[k, i].double().numpy() + \
                getattr(targets, f"bias_{layer}")[k, i, 0].double().numpy()
            h = np.maximum(h, 0.0) if layer < targets.num_layers - 1 else h
        outputs.append(h)
    return np.stack(outputs, axis=1)


def reference_drnd_bonus(predicted, target_features, alpha) -> np.ndarray:
    """b = alpha sum_d (f - mu)^2 + (1 - alpha) mean_d sqrt(clip(|f^2 - mu^2| / (B2 - mu^2), 1e-3, 1)), per sample."""
    bonus = []
    for f, c in zip(predicted, target_features):
        mu, second_moment = c.mean(0), (c**2).mean(0)
        ratio = np.abs(f**2 - mu**2) / (second_moment - mu**2 + 1e-8)
        bonus.append(alpha * ((f - mu) ** 2).sum() + (1 - alpha) * np.sqrt(np.clip(ratio, 1e-3, 1.0)).mean())
    return np.array(bonus)


def set_drnd_history(agent) -> dict:
    """Statistics and bonus sums as earlier rollouts left them (narrow input statistics, so that some of this
    rollout's standardized inputs reach the +-5 clip); returns a float64 copy for the reference."""
    rng = np.random.default_rng(5)
    agent.drnd_input_rms.mean = rng.normal(scale=0.3, size=agent.drnd_input_rms.mean.shape)
    agent.drnd_input_rms.var = rng.uniform(0.01, 0.05, size=agent.drnd_input_rms.var.shape)
    agent.drnd_input_rms.count = 1000.0
    agent.int_return_rms.mean = np.array([[0.5], [1.5]])
    agent.int_return_rms.var = np.array([[0.3], [0.05]])
    agent.int_return_rms.count = 20.0
    agent.int_discounted_sum = np.array([[0.7, 1.3], [2.0, 0.1]])
    return copy.deepcopy({"input": agent.drnd_input_rms.state_dict(), "return": agent.int_return_rms.state_dict(),
                          "sums": agent.int_discounted_sum})


def reference_drnd_batch(run, rollout, history, k: int) -> dict:
    """Seed k's DRND batch as docs/baselines.md ("Baseline PPO_DRND") describes it, step by step in float64."""
    args, agent, data = run.args, run.agent, ref.seed_data(rollout, k)
    inputs = np.concatenate([data["obs"], np.clip(data["actions"], -1.0, 1.0)], axis=1)
    _, mean, var = pooled(history["input"]["count"], history["input"]["mean"][k, 0], history["input"]["var"][k, 0],
                          inputs)
    standardized = (inputs - mean) / np.sqrt(var + 1e-8)
    assert (np.abs(standardized) > 5).any()  # the clip is exercised
    standardized = np.clip(standardized, -5.0, 5.0)
    predicted = ref.np_outputs(agent.predictor, k, standardized)[-1]
    bonus = reference_drnd_bonus(predicted, np_targets(agent.targets, k, standardized), args.drnd_alpha)
    bonus = bonus.reshape(ref.T, ref.ENVS)
    # RND's forward filter per env, continued from the previous rollout's sums, never reset at an episode end
    sums = np.zeros((ref.T, ref.ENVS))
    for env in range(ref.ENVS):
        running = history["sums"][k, env]
        for t in range(ref.T):
            running = args.int_gamma * running + bonus[t, env]
            sums[t, env] = running
    _, _, sums_var = pooled(history["return"]["count"], history["return"]["mean"][k, 0], history["return"]["var"][k, 0],
                            sums.ravel())
    int_rewards = bonus / math.sqrt(sums_var + 1e-8)
    critic = {name: ref.np_network(agent.critic, k, data[name]) for name in ("obs", "next_obs")}
    int_values = critic["obs"]["head_int"][:, 0].reshape(ref.T, ref.ENVS)
    next_int_values = critic["next_obs"]["head_int"][:, 0].reshape(ref.T, ref.ENVS)
    # the intrinsic return is non-episodic: no termination zeroes V_int(s_{t+1}); an episode end bootstraps from
    # V_int(final observation) and the recursion stops there (the next buffer entry is another episode)
    int_advantages = np.zeros((ref.T, ref.ENVS))
    for env in range(ref.ENVS):
        later = 0.0
        for t in reversed(range(ref.T)):
            if data["dones"][t, env]:
                later = 0.0
            delta = int_rewards[t, env] + args.int_gamma * next_int_values[t, env] - int_values[t, env]
            later = delta + args.int_gamma * args.gae_lambda * later
            int_advantages[t, env] = later
    ppo = ref.reference_ppo_batch(run, rollout, k)
    return {**ppo, "bonus": bonus, "sums": sums, "sums_var": sums_var, "int_rewards": int_rewards,
            "int_values": int_values.ravel(), "next_int_values": next_int_values,
            "int_advantages": int_advantages.ravel(),
            "int_returns": (int_advantages + int_values).ravel(), "standardized": standardized, "predicted": predicted,
            "policy_advantages": args.ext_coef * ppo["advantages"] + args.int_coef * int_advantages.ravel()}


@pytest.mark.parametrize("norm_adv", [False, True])
def test_drnd_batch_intrinsic_rewards_non_episodic_returns_and_mixed_advantages(norm_adv):
    run = ref.make_run(drnd, norm_adv=norm_adv, **DRND_ARGS)
    history = set_drnd_history(run.agent)
    rollout = ref.hand_built_rollout()
    batch = drnd.compute_advantages(run, rollout, run.args)
    for k in range(2):
        reference = reference_drnd_batch(run, rollout, history, k)
        ref.close(batch["bonus"][k], reference["bonus"], rtol=1e-4)
        ref.close(batch["int_rewards"][k], reference["int_rewards"], rtol=1e-4)
        ref.close(run.agent.int_discounted_sum[k], reference["sums"][-1], rtol=1e-4)  # carried to the next rollout
        ref.close(run.agent.int_return_rms.var[k, 0], reference["sums_var"], rtol=1e-4)
        ref.close(batch["int_values"][k], reference["int_values"])
        ref.close(batch["int_returns"][k], reference["int_returns"], rtol=1e-4)
        ref.close(batch["returns"][k], reference["returns"])
        ref.close(batch["values"][k], reference["values"])
        # an episodic intrinsic return would drop gamma_int V_int(final observation) at each termination: visible here
        terminal = ref.TERMINATIONS[k] == 1
        assert terminal.any() and (np.abs(run.args.int_gamma * reference["next_int_values"][terminal]) > 1e-3).all()
        expected = reference["policy_advantages"]
        ref.close(batch["advantages"][k], ref.normalized(expected) if norm_adv else expected, rtol=1e-4)
        # the intrinsic part is not negligible beside the extrinsic one
        assert np.abs(run.args.int_coef * reference["int_advantages"]).max() > 0.05


def test_drnd_losses_of_both_value_heads_the_mixed_policy_advantage_and_the_predictor():
    run = ref.make_run(drnd, **DRND_ARGS)
    history = set_drnd_history(run.agent)
    rollout = ref.hand_built_rollout()
    batch = drnd.compute_advantages(run, rollout, run.args)
    references = [reference_drnd_batch(run, rollout, history, k) for k in range(2)]
    old_actor = copy.deepcopy(run.agent.actor)
    ref.perturb(run.agent.actor, 11, 0.01)
    ref.perturb(run.agent.critic, 12, 0.3)
    mb, index = ref.minibatch(drnd, batch)
    losses, stats = drnd.ppo_loss(run.agent, mb, run.args)
    generator_states = [generator.get_state() for generator in run.generators]
    predictor_loss = drnd.predictor_loss(run, mb, run.args)
    for k, reference in enumerate(references):
        rows = index[k]
        obs, actions = rollout.obs[k, rows].double().numpy(), rollout.actions[k, rows].double().numpy()
        new_log_probs = ref.np_log_prob(run.agent.actor, k, obs, actions)
        old_log_probs = ref.np_log_prob(old_actor, k, obs, actions)
        ref.assert_both_clip_cases(new_log_probs, old_log_probs, run.args.clip_coef)
        surrogate = ref.reference_surrogate(new_log_probs, old_log_probs,
                                            ref.normalized(reference["policy_advantages"])[rows], run.args.clip_coef)
        ref.close(losses["actor"][k], surrogate - run.args.ent_coef * ref.np_entropy(run.agent.actor, k), rtol=1e-4)
        heads = ref.np_network(run.agent.critic, k, obs)
        ext_loss = np.mean((heads["head"][:, 0] - reference["returns"][rows]) ** 2)
        int_loss = np.mean((heads["head_int"][:, 0] - reference["int_returns"][rows]) ** 2)
        assert int_loss > 0.01
        ref.close(stats["value_loss_ext"][k], ext_loss, rtol=1e-4)
        ref.close(stats["value_loss_int"][k], int_loss, rtol=1e-4)
        ref.close(losses["critic"][k], ext_loss + int_loss, rtol=1e-4)
        # the predictor: the first round(0.25 x 6) = 2 samples of the seed's minibatch, each regressed onto one target
        # drawn from the seed's own generator
        size = round(run.args.drnd_update_proportion * len(rows))
        draw = torch.Generator()
        draw.set_state(generator_states[k])
        chosen = torch.randint(run.args.num_targets, (size,), generator=draw).numpy()
        standardized = reference["standardized"][rows[:size]]
        predicted = ref.np_outputs(run.agent.predictor, k, standardized)[-1]
        targets = np_targets(run.agent.targets, k, standardized)
        ref.close(predictor_loss[k],
                  np.mean([np.mean((p - c[i]) ** 2) for p, c, i in zip(predicted, targets, chosen)]), rtol=1e-4)
