"""ppo_continuous.py's method, the half above the plumbing marker: GAE and the advantages, the Gaussian policy and
its networks, PPO's loss and update with the flags that change them; and the phase functions against the independent
reference of tests/reference_math.py.

The plumbing below the marker (the same in every script) is tested in tests/plumbing/ (its units in
tests/plumbing/test_plumbing.py), the end-to-end properties every script shares in tests/plumbing/test_all_scripts.py.
"""

import importlib
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import ppo_continuous as ppo
import reference_math
from reference_math import brute_force_gae
from scripts import sync_plumbing


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


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    torch.manual_seed(0)
    mean, actions = torch.randn(5, 3), torch.randn(5, 3)
    log_std = torch.randn(3)
    reference = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(ppo.gaussian_log_prob(actions, mean, log_std), reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(ppo.gaussian_entropy(log_std), reference.entropy()[0].sum())


def generators(*seeds):
    return [torch.Generator().manual_seed(seed) for seed in seeds]


def network_args(**flags) -> "ppo.Args":
    """The scripts' Args with small networks (hidden_dim 16) and the given network and policy flags."""
    return ppo.Args(**{"hidden_dim": 16, **flags})


def test_networks_expose_features_and_hidden_activations():
    critic, actor = ppo.Critic(7, network_args(), generators(1, 2)), ppo.Actor(7, 2, network_args(), generators(1, 2))
    x = torch.randn(2, 4, 7)  # (seeds, samples, obs_dim)
    for network in (critic, actor):
        activations = network.hidden_activations(x)
        assert len(activations) == 2 and all(a.shape == (2, 4, 16) and (a >= 0).all() for a in activations)
        torch.testing.assert_close(network.features(x), activations[-1])
    torch.testing.assert_close(critic(x), critic.head(critic.features(x)).squeeze(-1))
    # the log std starts at --log-std-init (-1 by default) in each of the 2 seeds x 2 action dimensions
    assert actor(x).shape == (2, 4, 2) and math.isclose(actor.log_std.sum().item(), 4 * -1.0)


def test_normalize_advantages_per_seed():
    """Each seed's row to mean 0 and std s / (s + 1e-8), s its own std (the 1e-8 keeps a constant row finite)."""
    generator = torch.Generator().manual_seed(0)
    scales = torch.tensor([[1.0], [10.0], [0.1]], dtype=torch.float64)
    advantages = torch.randn(3, 64, dtype=torch.float64, generator=generator) * scales
    normalized = ppo.normalize_advantages(advantages)
    stds = advantages.std(-1)
    torch.testing.assert_close(normalized.mean(-1), torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(normalized.std(-1), stds / (stds + 1e-8), atol=1e-12, rtol=0)


# ---- The policy flags (since v0.2, 2026-11-27: studies/2026-11-27_why_ppo_does_not_walk_on_ant): each reading
# of the paper's unstated choices ----


def test_policy_head_gain_is_the_orthogonal_gain_of_the_mean_head():
    actor = ppo.Actor(7, 3, network_args(policy_head_gain=0.5), generators(1))
    weight = actor.mean_head.weight[0].detach()  # 3 x 16: orthonormal rows scaled by the gain
    torch.testing.assert_close(weight @ weight.T, 0.25 * torch.eye(3), atol=1e-6, rtol=0)
    default = ppo.Actor(7, 3, network_args(), generators(1)).mean_head.weight[0].detach()
    torch.testing.assert_close(default @ default.T, 1e-4 * torch.eye(3), atol=1e-9, rtol=0)


def test_log_std_init_clamp_and_learning():
    """--log-std-init sets the std; --log-std-max clamps it in the policy and passes no gradient above the bound
    (ObjectRL: from 0 with bound -1 the std stays exp(-1)); --no-learn-log-std leaves it out of the optimizer's
    steps."""
    actor = ppo.Actor(5, 4, network_args(log_std_init=-0.5), generators(1, 2))
    assert torch.equal(actor.action_log_std(), torch.full((2, 1, 4), -0.5))
    clamped = ppo.Actor(5, 4, network_args(log_std_init=0.0, log_std_max=-1.0), generators(1, 2))
    with torch.no_grad():
        clamped.log_std[1] = -1.5  # seed 1 below the bound, seed 0 (at 0) above it
    log_std = clamped.action_log_std()
    assert torch.equal(log_std[0], torch.full((1, 4), -1.0)) and torch.equal(log_std[1], torch.full((1, 4), -1.5))
    ppo.gaussian_entropy(log_std).sum().backward()  # d entropy / d log_std = 1 per entry where it passes
    assert (torch.equal(clamped.log_std.grad[0], torch.zeros(1, 4))
            and torch.equal(clamped.log_std.grad[1], torch.ones(1, 4)))

    fixed = ppo.Actor(5, 4, network_args(log_std_init=-1.0, learn_log_std=False), generators(1))
    optimizer = ppo.SeedwiseAdam(fixed.parameters(), lr=0.1)
    mean_before = fixed.mean_head.weight.detach().clone()
    x, actions = torch.randn(1, 8, 5), torch.randn(1, 8, 4)
    (-ppo.gaussian_log_prob(actions, fixed(x), fixed.action_log_std()).mean()).backward()
    optimizer.step()
    assert not fixed.log_std.requires_grad and torch.equal(fixed.log_std, torch.full((1, 1, 4), -1.0))
    assert not torch.equal(fixed.mean_head.weight.detach(), mean_before)


# ---- PPO's flags, each on a hand-built batch: a test that fails if the flag stops doing what it says ----

OBS_DIM, ACTION_DIM = 3, 2


def hand_built_run(seeds=(1,), batch_size=8, **flags) -> "ppo.Run":
    """A Run holding only what compute_advantages, update and set_learning_rate read: the args, make_agent's
    agent, each seed's generator, and the per-update state of Run.next_iteration."""
    run = ppo.Run()
    run.args, run.seeds, run.device = network_args(**flags), list(seeds), torch.device("cpu")
    run.generators = generators(*seeds)
    run.agent = ppo.make_agent(run.args, OBS_DIM, ACTION_DIM, run.generators, run.device)
    run.batch_size, run.seed_rows = batch_size, torch.arange(len(seeds))[:, None]
    run.consecutive_nonfinite = np.zeros(len(seeds), np.int64)
    run.global_step, run.total_steps, run.iteration, run.exit_code = 0, 1, 0, 0
    assert run.next_iteration()
    return run


def hand_built_batch(num_seeds=1, samples=8, seed=0) -> dict:
    """A batch as compute_advantages makes it, (seeds, samples, ...), with old log-probs that are not the current
    policy's (so the ratio and the KL are not 1 and 0)."""
    rng = torch.Generator().manual_seed(seed)
    draw = lambda *shape: torch.randn(num_seeds, samples, *shape, generator=rng)
    return {"obs": draw(OBS_DIM), "actions": draw(ACTION_DIM), "old_log_probs": draw() - 3.0,
            "advantages": draw(), "returns": draw(), "values": draw()}


def reference_policy(agent, batch):
    """The policy of the actor as torch.distributions sees it (the reference for gaussian_log_prob/entropy)."""
    mean = agent.actor(batch["obs"])
    return torch.distributions.Normal(mean, torch.exp(agent.actor.log_std).expand_as(mean))


def test_ent_coef_subtracts_ent_coef_times_the_entropy_from_the_actor_loss():
    """actor loss = clipped surrogate - ent_coef * entropy, both written out here with torch.distributions."""
    batch = hand_built_batch()
    for ent_coef in (0.0, 0.25):
        run = hand_built_run(ent_coef=ent_coef)
        losses, stats = ppo.ppo_loss(run.agent, batch, run.args)
        policy = reference_policy(run.agent, batch)
        ratio = torch.exp(policy.log_prob(batch["actions"]).sum(-1) - batch["old_log_probs"])
        surrogate = torch.max(-batch["advantages"] * ratio, -batch["advantages"] * ratio.clamp(0.8, 1.2)).mean(-1)
        entropy = policy.entropy().sum(-1)[:, 0]  # state-independent std: the same at every sample
        assert entropy.item() > 0.5  # the term is not negligible at the default log std (-1)
        torch.testing.assert_close(losses["actor"], surrogate - ent_coef * entropy)
        torch.testing.assert_close(stats["entropy"], entropy)


def test_clip_vloss_is_the_max_of_the_plain_and_the_clipped_squared_errors():
    """--clip-vloss: mean(max((V - R)^2, (V_old + clip(V - V_old, +-c) - R)^2)), written out in numpy; off, the
    plain mean squared error. The batch's old values are far from the critic's, so the two differ."""
    batch = hand_built_batch()
    batch["values"] = batch["values"] + 2.0
    critic_values = {}
    for clip_vloss in (False, True):
        run = hand_built_run(clip_vloss=clip_vloss)
        losses, stats = ppo.ppo_loss(run.agent, batch, run.args)
        critic_values[clip_vloss] = losses["critic"]
        v = run.agent.critic(batch["obs"]).detach().numpy()
        v_old, returns = batch["values"].numpy(), batch["returns"].numpy()
        plain = (v - returns) ** 2
        clipped = (v_old + np.clip(v - v_old, -0.2, 0.2) - returns) ** 2
        expected = (np.maximum(plain, clipped) if clip_vloss else plain).mean(-1)
        np.testing.assert_allclose(losses["critic"].detach().numpy(), expected, rtol=1e-6)
        np.testing.assert_allclose(stats["value_loss"].detach().numpy(), expected, rtol=1e-6)
    assert critic_values[True].item() > critic_values[False].item() + 0.1


@pytest.mark.parametrize("norm_adv", [True, False])
def test_no_norm_adv_gives_the_actor_the_raw_gae_advantages(norm_adv):
    """compute_advantages: with --no-norm-adv the batch's advantages are GAE's own (brute_force_gae above), with
    --norm-adv (the default) (A - mean) / (std + 1e-8) over each seed's batch; the returns are A + V either way."""
    from types import SimpleNamespace

    seeds, steps, envs = (1, 2), 6, 2
    run = hand_built_run(seeds=seeds, batch_size=steps * envs, norm_adv=norm_adv, num_steps=steps, num_envs=envs)
    rng = np.random.default_rng(4)
    terminations = np.zeros((2, steps, envs), np.float32)
    terminations[0, 2, 1] = 1.0
    dones = terminations.copy()
    dones[1, 3, 0] = 1.0  # a truncation
    rollout = SimpleNamespace(obs=torch.randn(2, steps * envs, OBS_DIM), next_obs=torch.randn(2, steps * envs, OBS_DIM),
                              actions=torch.randn(2, steps * envs, ACTION_DIM),
                              rewards=torch.from_numpy(rng.normal(size=(2, steps, envs)).astype(np.float32)),
                              terminations=torch.from_numpy(terminations), dones=torch.from_numpy(dones),
                              shape=(2, steps, envs))
    batch = ppo.compute_advantages(run, rollout, run.args)
    with torch.no_grad():
        values = run.agent.critic(rollout.obs).reshape(2, steps, envs).numpy()
        next_values = run.agent.critic(rollout.next_obs).reshape(2, steps, envs).numpy()
    for k in range(2):
        raw = brute_force_gae(rollout.rewards[k].numpy(), values[k], next_values[k], terminations[k], dones[k],
                              run.args.gamma, run.args.gae_lambda).reshape(-1)
        expected = (raw - raw.mean()) / (raw.std(ddof=1) + 1e-8) if norm_adv else raw
        np.testing.assert_allclose(batch["advantages"][k].numpy(), expected, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(batch["returns"][k].numpy(), raw + values[k].reshape(-1), rtol=1e-5, atol=1e-5)
        assert abs(raw.mean()) > 0.05 or abs(raw.std() - 1) > 0.05  # raw and normalized differ here


STEPS, ENVS = 6, 2


def rollout_with_episode_ends(truncated: bool, seed: int = 4) -> SimpleNamespace:
    """A two-seed rollout (seeds, STEPS, ENVS) that compute_advantages reads: a termination of seed 0 at step 2 and,
    when ``truncated``, a time-limit truncation of each seed's env 0 at step 3 (dones 1, terminations 0)."""
    rng = np.random.default_rng(seed)
    terminations = np.zeros((2, STEPS, ENVS), np.float32)
    terminations[0, 2, 1] = 1.0
    dones = terminations.copy()
    if truncated:
        dones[:, 3, 0] = 1.0
    draw = lambda *shape: torch.from_numpy(rng.normal(size=(2, STEPS * ENVS, *shape)).astype(np.float32))
    return SimpleNamespace(obs=draw(OBS_DIM), next_obs=draw(OBS_DIM), actions=draw(ACTION_DIM),
                           rewards=torch.from_numpy(rng.normal(size=(2, STEPS, ENVS)).astype(np.float32)),
                           terminations=torch.from_numpy(terminations), dones=torch.from_numpy(dones),
                           shape=(2, STEPS, ENVS))


def script_run(module, **flags):
    """A two-seed Run of ``module`` holding what its compute_advantages reads: the args and make_agent's agent."""
    run = module.Run()
    run.args = module.Args(hidden_dim=16, num_steps=STEPS, num_envs=ENVS, **flags)
    run.seeds, run.device, run.generators = [1, 2], torch.device("cpu"), generators(1, 2)
    run.action_low, run.action_high = -np.ones(ACTION_DIM, np.float32), np.ones(ACTION_DIM, np.float32)
    run.agent = module.make_agent(run.args, OBS_DIM, ACTION_DIM, run.generators, run.device)
    return run


def test_gae_across_truncations_stops_the_recursion_only_at_terminations():
    """--gae-across-truncations (ObjectRL's code): compute_advantages' raw advantages (returns - values) are
    sum_l (gamma lambda)^l delta_{t+l} with only (1 - terminated) factors cutting the sum (brute_force_gae with the
    terminations as the episode ends), so the steps before a truncation differ from the default's, whose sum stops
    there; with no truncation in the rollout both settings give the same batch, bit for bit."""
    advantages = {}
    for across in (False, True):
        run = hand_built_run(seeds=(1, 2), batch_size=STEPS * ENVS, norm_adv=False, num_steps=STEPS,
                             num_envs=ENVS, gae_across_truncations=across)
        rollout = rollout_with_episode_ends(truncated=True)
        batch = ppo.compute_advantages(run, rollout, run.args)
        with torch.no_grad():
            values = run.agent.critic(rollout.obs).reshape(rollout.shape).double().numpy()
            next_values = run.agent.critic(rollout.next_obs).reshape(rollout.shape).double().numpy()
        episode_ends = rollout.terminations if across else rollout.dones
        for k in range(2):
            expected = brute_force_gae(rollout.rewards[k].numpy(), values[k], next_values[k],
                                       rollout.terminations[k].numpy(), episode_ends[k].numpy(), run.args.gamma,
                                       run.args.gae_lambda)
            np.testing.assert_allclose(batch["advantages"][k].numpy(), expected.reshape(-1), rtol=1e-5, atol=1e-5)
        advantages[across] = batch["advantages"].reshape(rollout.shape)
        no_truncation = rollout_with_episode_ends(truncated=False)
        untruncated = ppo.compute_advantages(run, no_truncation, run.args)["advantages"]
        advantages[across, "untruncated"] = untruncated
    before, after = slice(0, 4), slice(4, STEPS)  # env 0's steps up to the truncation at step 3, and after it
    assert (advantages[True][:, before, 0] - advantages[False][:, before, 0]).abs().min() > 1e-4
    assert torch.equal(advantages[True][:, after], advantages[False][:, after])
    assert torch.equal(advantages[True][:, :, 1], advantages[False][:, :, 1])  # env 1: a termination only
    assert torch.equal(advantages[True, "untruncated"], advantages[False, "untruncated"])


@pytest.mark.parametrize("script", [sync_plumbing.TEMPLATE, *sync_plumbing.SCRIPTS])
def test_every_script_reads_gae_across_truncations(script):
    """Every script's compute_advantages: --gae-across-truncations changes the advantages of a rollout with a
    truncation and leaves those of a rollout without one bit for bit as the default's."""
    module = importlib.import_module(script[: -len(".py")])
    advantages = {}
    for truncated in (False, True):
        for across in (False, True):
            run = script_run(module, gae_across_truncations=across)
            batch = module.compute_advantages(run, rollout_with_episode_ends(truncated), run.args)
            advantages[truncated, across] = batch["advantages"]
    assert torch.equal(advantages[False, False], advantages[False, True]), script
    assert not torch.allclose(advantages[True, False], advantages[True, True]), script


def test_target_kl_stops_the_update_after_the_epoch_whose_kl_exceeds_it():
    """--target-kl: the epochs stop after the first whose last minibatch's approx_kl exceeds it (CleanRL); the
    hand-built batch's old log-probs are far from the policy, so its KL is well above 1e-6 and below 1e6."""
    minibatch_steps = {}
    for target_kl in (None, 1e6, 1e-6):
        run = hand_built_run(minibatch_size=4, update_epochs=3, target_kl=target_kl)
        means = ppo.update(run, hand_built_batch(), run.args)
        assert 1e-6 < means["approx_kl"][0] < 1e6
        minibatch_steps[target_kl] = run.stats.minibatch_steps.tolist()
    assert minibatch_steps == {None: [6], 1e6: [6], 1e-6: [2]}  # 3 epochs of 2 minibatches, or the first epoch only


def test_anneal_lr_lowers_the_learning_rate_linearly_and_the_optimizers_step_with_it():
    """--anneal-lr: iteration i of n sets lr * (1 - (i - 1) / n) on both optimizers (what charts/learning_rate
    logs); Adam's first step moves each parameter by that lr (its step is lr * g / (|g| + eps), |g| = 1 here).
    Without the flag the rate stays."""
    for anneal_lr, expected in ((True, [1.0, 0.75, 0.5, 0.25]), (False, [1.0] * 4)):
        run = hand_built_run(anneal_lr=anneal_lr, learning_rate=0.01)
        run.num_iterations = 4
        rates = []
        for run.iteration in range(1, 5):
            ppo.set_learning_rate(run, run.args)
            assert run.agent.critic_optimizer.param_groups[0]["lr"] == run.agent.actor_optimizer.param_groups[0]["lr"]
            rates.append(run.agent.actor_optimizer.param_groups[0]["lr"])
        assert rates == pytest.approx([0.01 * r for r in expected], rel=1e-12)
        bias = run.agent.actor.mean_head.bias
        before = bias.detach().clone()
        run.agent.actor_optimizer.zero_grad()
        bias.sum().backward()
        run.agent.actor_optimizer.step()
        torch.testing.assert_close(before - bias.detach(), torch.full_like(before, rates[-1]), rtol=1e-4, atol=0)



# ---- The phase functions against the independent reference (tests/reference_math.py) ----

# Each flag that changes PPO's math, two seeds each, one or two envs per seed.
PPO_CASES = {"defaults": dict(num_envs=2),
             "entropy-clip-vloss-joint": dict(num_envs=1, ent_coef=0.05, clip_vloss=True, joint_optimizer=True),
             "raw-advantages": dict(num_envs=2, norm_adv=False)}
REFERENCE_CASES = [pytest.param(changes, id=f"ppo-{name}") for name, changes in PPO_CASES.items()]


@pytest.mark.parametrize("changes", REFERENCE_CASES)
def test_batch_advantages_and_targets_equal_the_reference(changes):
    """compute_advantages: the advantages before and after normalization, the targets, the values and the old
    log-probabilities, each seed's its own (reference_math.assert_batch_equals_the_reference)."""
    reference_math.assert_batch_equals_the_reference(ppo, changes)


@pytest.mark.parametrize("changes", REFERENCE_CASES)
def test_losses_equal_the_reference(changes):
    """ppo_loss on the batch, with both networks moved since the rollout: the actor's and the critic's losses and
    the logged terms (reference_math.assert_losses_equal_the_reference)."""
    reference_math.assert_losses_equal_the_reference(ppo, changes)


@pytest.mark.parametrize("changes", REFERENCE_CASES)
def test_one_update_step_follows_the_reference_gradients(changes):
    """update with one minibatch: every parameter's gradient is the reference loss's, clipped per seed at
    --max-grad-norm, and the step is Adam's first
    (reference_math.assert_update_step_follows_the_reference_gradients)."""
    reference_math.assert_update_step_follows_the_reference_gradients(ppo, changes)


@pytest.mark.parametrize("changes", REFERENCE_CASES[:1])
def test_truncation_bootstraps_from_the_final_state_and_termination_does_not(changes):
    """Moving the final state of a truncated episode moves the advantages before it; moving a terminal state
    moves nothing (reference_math.assert_truncation_bootstraps_and_termination_does_not)."""
    reference_math.assert_truncation_bootstraps_and_termination_does_not(ppo, changes)
