"""The baselines' method terms as their phase functions assemble them, against an independent reference.

Each script's own ``compute_advantages``, ``ppo_loss`` and ``update`` run on one small hand-built rollout (two seeds
whose data, weights, terminations and time-limit truncations differ); the reference recomputes what they should
give in numpy float64 with plain loops, from the networks' weights and the documented formulas, never by calling
the scripts' helpers. Per script:

- PFO: the rollout policy's pre-activation features in the batch, and the actor's loss = the clipped surrogate
  (written case by case) - ent_coef x entropy + feature_coef x mean over samples of the mean over units of
  (phi - phi_old)^2.
- PPO_DRND: the bonus of every (s_t, clipped a_t) standardized by statistics pooled over everything seen, the
  forward filter of bonus sums continued from the previous rollout, the intrinsic reward b_t / std(all sums), the
  non-episodic intrinsic GAE (docs/baselines.md: no termination zeroes V_int(s_{t+1}); an episode end bootstraps
  from V_int of the final observation and stops the recursion), the policy's ext_coef A_ext + int_coef A_int
  (raw and normalized), both heads' returns and squared errors, and the predictor's subset and target draws.
- CB, PPO_ReDo, PPO_SnP: the template's advantages and losses as each script assembles them (CB's passes the
  hidden activations it computed on to generate-and-test), and one whole ``update`` against a reference first Adam
  step followed by the method's own term: CB's L2 term inside Adam and the contribution utilities of the
  minibatch's pre-step activations; ReDo's recycle of the units tau-dormant after the step; SnP's
  theta <- lambda theta_stepped + sigma theta_fresh. Their terms' closed forms for given inputs (GenerateAndTest's
  utilities and replacements, recycle_units, shrink_perturb) are in test_cb.py, test_redo.py and test_snp.py.
"""

import copy
import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats
import torch

import cb_continuous
import pfo_continuous
import ppo_drnd_continuous
import ppo_redo_continuous
import ppo_snp_continuous
from reference_math import brute_force_gae

SEEDS = (3, 7)
OBS_DIM, ACTION_DIM, HIDDEN, T, ENVS = 3, 2, 8, 5, 2
BATCH = T * ENVS
# (seeds, T, envs), hand-built: terminations and time-limit truncations at different places in each seed, episode
# ends at the buffer's first and last steps.
TERMINATIONS = np.array([[[0, 0], [1, 0], [0, 0], [0, 0], [0, 0]],
                         [[0, 0], [0, 0], [0, 1], [0, 0], [1, 0]]], np.float32)
TRUNCATIONS = np.array([[[0, 0], [0, 0], [0, 0], [0, 1], [0, 0]],
                        [[1, 0], [0, 0], [0, 0], [0, 0], [0, 0]]], np.float32)
REWARDS = np.array([[[1.0, -0.5], [2.0, 0.25], [-1.0, 0.75], [0.5, 1.5], [0.0, -2.0]],
                    [[-0.25, 1.0], [0.5, 0.5], [3.0, -1.5], [1.25, 0.0], [-0.75, 2.5]]], np.float32)
# The tiny Args of every test: distinct gamma, lambda and intrinsic gamma, so that a term using the wrong one shows
SHARED_ARGS = dict(hidden_dim=HIDDEN, num_steps=T, num_envs=ENVS, minibatch_size=BATCH, update_epochs=1,
                   gamma=0.95, gae_lambda=0.8, ent_coef=0.01)
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


# ---- The hand-built rollout and the fake run the phase functions read ----


def hand_built_rollout() -> SimpleNamespace:
    """The rollout as collect_rollout hands it on: obs, next_obs, actions (seeds, T * envs, ...), rewards,
    terminations, dones (seeds, T, envs). next_obs[t] is obs[t + 1] inside an episode and the episode's own final
    observation where it ended; some actions lie outside the bounds [-1, 1]."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(2, T + 1, ENVS, OBS_DIM)) * np.array([1.0, 2.0, 3.0])
    final_obs = rng.normal(size=(2, T, ENVS, OBS_DIM))
    dones = np.maximum(TERMINATIONS, TRUNCATIONS)
    next_obs = np.where(dones[..., None] == 1, final_obs, obs[:, 1:])
    actions = rng.normal(scale=1.5, size=(2, T, ENVS, ACTION_DIM))
    assert (np.abs(actions) > 1).any()

    def tensor(x, *shape):
        return torch.from_numpy(np.ascontiguousarray(x, np.float32)).reshape(*shape)

    return SimpleNamespace(obs=tensor(obs[:, :T], 2, BATCH, OBS_DIM), next_obs=tensor(next_obs, 2, BATCH, OBS_DIM),
                           actions=tensor(actions, 2, BATCH, ACTION_DIM), rewards=tensor(REWARDS, 2, T, ENVS),
                           terminations=tensor(TERMINATIONS, 2, T, ENVS), dones=tensor(dones, 2, T, ENVS),
                           shape=(2, T, ENVS))


def make_run(module, **method_args) -> SimpleNamespace:
    """The script's own agent (make_agent, one stacked copy per seed) in the run fields that compute_advantages,
    ppo_loss and update read (a fresh update's counters, as Run.iterating sets them)."""
    args = dataclasses.replace(module.Args(), **SHARED_ARGS, **method_args)
    generators = [torch.Generator().manual_seed(seed) for seed in SEEDS]
    agent = module.make_agent(args, OBS_DIM, ACTION_DIM, generators, torch.device("cpu"))
    return SimpleNamespace(
        args=args, agent=agent, generators=generators, device=torch.device("cpu"), seeds=list(SEEDS),
        seed_rows=torch.arange(2)[:, None], batch_size=BATCH, action_low=-np.ones(ACTION_DIM, np.float32),
        action_high=np.ones(ACTION_DIM, np.float32), consecutive_nonfinite=np.zeros(2, np.int64),
        minibatch_steps=np.zeros(2, np.int64), skipped_this_update=np.zeros(2, np.int64),
        skip_reasons=[set(), set()], critic_max_grad=torch.zeros(2), stat_names=[], stat_sums=None, grad_norms={})


def perturb(network, seed: int, scale: float) -> None:
    """Move every parameter of a network, so that a minibatch loss sees a policy (critic) other than the rollout's."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in network.parameters():
            parameter += scale * torch.randn(parameter.shape, generator=generator)


def minibatch(module, batch: dict):
    """Each seed's own samples, in its own order (the script's Minibatch gathers them)."""
    index = torch.stack([torch.tensor([7, 0, 3, 9, 4, 1]), torch.tensor([2, 8, 5, 0, 6, 9])])
    return module.Minibatch(batch, index, torch.arange(2)[:, None]), index.numpy()


# ---- The reference: networks, Gaussian policy, GAE and PPO's loss, written out in float64 ----


def weights(module_layer, k: int, name: str) -> np.ndarray:
    return getattr(module_layer, name).detach()[k].double().numpy()


def np_layer(layer, k: int, x: np.ndarray) -> np.ndarray:
    """Seed k's copy of one layer of a stacked network, from its weights."""
    kind = type(layer).__name__
    if kind == "StackedLinear":
        return x @ weights(layer, k, "weight").T + weights(layer, k, "bias")[0]
    if kind == "StackedLayerNorm":
        normalized = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
        return normalized * weights(layer, k, "weight")[0] + weights(layer, k, "bias")[0]
    if kind == "ReLU":
        return np.maximum(x, 0.0)
    raise TypeError(kind)


def np_outputs(layers, k: int, x: np.ndarray) -> list:
    """The output of every layer in turn."""
    outputs = []
    for layer in layers:
        x = np_layer(layer, k, x)
        outputs.append(x)
    return outputs


def np_network(network, k: int, obs: np.ndarray) -> dict:
    """Seed k's actor or critic on obs (samples, obs_dim): the pre-activation of its last hidden layer, the ReLU
    outputs, and its heads' outputs."""
    trunk = np_outputs(network.trunk, k, obs)
    out = {"preactivation": trunk[-2], "hidden": [o for o, m in zip(trunk, network.trunk) if type(m).__name__ == "ReLU"]}
    for name in ("mean_head", "head", "head_int"):
        if hasattr(network, name):
            out[name] = np_layer(getattr(network, name), k, trunk[-1])
    return out


def np_log_prob(actor, k: int, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    std = np.exp(weights(actor, k, "log_std")[0])
    return scipy.stats.norm.logpdf(actions, loc=np_network(actor, k, obs)["mean_head"], scale=std).sum(-1)


def np_entropy(actor, k: int) -> float:
    return scipy.stats.norm.entropy(scale=np.exp(weights(actor, k, "log_std")[0])).sum()


def normalized(advantages: np.ndarray) -> np.ndarray:
    return (advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8)


def reference_surrogate(new_log_probs, old_log_probs, advantages, clip_coef) -> float:
    """PPO's clipped objective, sample by sample in its case form (Schulman et al., 2017): a positive advantage's
    ratio counts up to 1 + eps, a negative one's down to 1 - eps; the loss is minus the mean."""
    objective = []
    for new, old, advantage in zip(new_log_probs, old_log_probs, advantages):
        ratio = math.exp(new - old)
        objective.append(advantage * (min(ratio, 1 + clip_coef) if advantage >= 0 else max(ratio, 1 - clip_coef)))
    return -float(np.mean(objective))


def assert_both_clip_cases(new_log_probs, old_log_probs, clip_coef) -> None:
    """The minibatch exercises the clipped and the unclipped case (the loss check is not vacuous)."""
    ratio = np.exp(np.asarray(new_log_probs) - np.asarray(old_log_probs))
    outside = np.abs(ratio - 1) > clip_coef
    assert outside.any() and not outside.all(), ratio


def seed_data(rollout, k: int) -> dict:
    """Seed k's rollout in float64: obs, next_obs and actions (T * envs, ...); rewards, terminations, dones (T, envs)."""
    return {name: getattr(rollout, name)[k].double().numpy() for name in
            ("obs", "next_obs", "actions", "rewards", "terminations", "dones")}


def reference_ppo_batch(run, rollout, k: int) -> dict:
    """Seed k's values, old log-probs, GAE advantages (before normalization) and returns, as Algorithm 1 defines them."""
    args, data = run.args, seed_data(rollout, k)
    values = np_network(run.agent.critic, k, data["obs"])["head"][:, 0].reshape(T, ENVS)
    next_values = np_network(run.agent.critic, k, data["next_obs"])["head"][:, 0].reshape(T, ENVS)
    advantages = brute_force_gae(data["rewards"], values, next_values, data["terminations"], data["dones"], args.gamma,
                               args.gae_lambda)
    return {"values": values.ravel(), "advantages": advantages.ravel(), "returns": (advantages + values).ravel(),
            "old_log_probs": np_log_prob(run.agent.actor, k, data["obs"], data["actions"])}


def close(actual, expected, **tolerance) -> None:
    actual = actual.detach().double().numpy() if isinstance(actual, torch.Tensor) else np.asarray(actual)
    np.testing.assert_allclose(actual, expected, **{**TOLERANCE, **tolerance})


# ---- PFO: the feature trust region ----


def test_pfo_batch_features_and_actor_loss_with_its_feature_penalty():
    run = make_run(pfo_continuous, feature_coef=3.0)
    rollout = hand_built_rollout()
    batch = pfo_continuous.compute_advantages(run, rollout, run.args)
    old_actor = copy.deepcopy(run.agent.actor)
    for k in range(2):
        reference = reference_ppo_batch(run, rollout, k)
        close(batch["advantages"][k], normalized(reference["advantages"]))
        close(batch["returns"][k], reference["returns"])
        close(batch["old_log_probs"][k], reference["old_log_probs"])
        # the features the penalty keeps close: the rollout policy's last LayerNorm output, before the ReLU
        features = np_network(old_actor, k, rollout.obs[k].double().numpy())["preactivation"]
        assert (features < 0).any()
        close(batch["old_features"][k], features)

    perturb(run.agent.actor, 11, 0.01)
    perturb(run.agent.actor.trunk, 13, 0.2)  # the features move more than the (small-gain) mean head shows
    mb, index = minibatch(pfo_continuous, batch)
    losses, stats = pfo_continuous.ppo_loss(run.agent, mb, run.args)
    for k in range(2):
        obs, actions = rollout.obs[k, index[k]].double().numpy(), rollout.actions[k, index[k]].double().numpy()
        reference = reference_ppo_batch(run, rollout, k)
        new_log_probs = np_log_prob(run.agent.actor, k, obs, actions)
        old_log_probs = np_log_prob(old_actor, k, obs, actions)
        assert_both_clip_cases(new_log_probs, old_log_probs, run.args.clip_coef)
        surrogate = reference_surrogate(new_log_probs, old_log_probs, normalized(reference["advantages"])[index[k]],
                                        run.args.clip_coef)
        moved = np_network(run.agent.actor, k, obs)["preactivation"] - np_network(old_actor, k, obs)["preactivation"]
        penalty = np.mean([np.mean(row**2) for row in moved])  # per sample over units, then over the minibatch
        assert run.args.feature_coef * penalty > 0.1  # the term is far above the tolerance
        close(stats["feature_distance"][k], penalty)
        close(losses["actor"][k], surrogate - run.args.ent_coef * np_entropy(run.agent.actor, k)
              + run.args.feature_coef * penalty)
        values = np_network(run.agent.critic, k, obs)["head"][:, 0]
        close(losses["critic"][k], np.mean((values - reference["returns"][index[k]]) ** 2))


# ---- PPO_DRND: the bonus, its scaling, the non-episodic intrinsic GAE and the mix ----


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
    args, agent, data = run.args, run.agent, seed_data(rollout, k)
    inputs = np.concatenate([data["obs"], np.clip(data["actions"], -1.0, 1.0)], axis=1)
    _, mean, var = pooled(history["input"]["count"], history["input"]["mean"][k, 0], history["input"]["var"][k, 0], inputs)
    standardized = (inputs - mean) / np.sqrt(var + 1e-8)
    assert (np.abs(standardized) > 5).any()  # the clip is exercised
    standardized = np.clip(standardized, -5.0, 5.0)
    predicted = np_outputs(agent.predictor, k, standardized)[-1]
    bonus = reference_drnd_bonus(predicted, np_targets(agent.targets, k, standardized), args.drnd_alpha).reshape(T, ENVS)
    # RND's forward filter per env, continued from the previous rollout's sums, never reset at an episode end
    sums = np.zeros((T, ENVS))
    for env in range(ENVS):
        running = history["sums"][k, env]
        for t in range(T):
            running = args.int_gamma * running + bonus[t, env]
            sums[t, env] = running
    _, _, sums_var = pooled(history["return"]["count"], history["return"]["mean"][k, 0], history["return"]["var"][k, 0],
                            sums.ravel())
    int_rewards = bonus / math.sqrt(sums_var + 1e-8)
    critic = {name: np_network(agent.critic, k, data[name]) for name in ("obs", "next_obs")}
    int_values = critic["obs"]["head_int"][:, 0].reshape(T, ENVS)
    next_int_values = critic["next_obs"]["head_int"][:, 0].reshape(T, ENVS)
    # the intrinsic return is non-episodic: no termination zeroes V_int(s_{t+1}); an episode end bootstraps from
    # V_int(final observation) and the recursion stops there (the next buffer entry is another episode)
    int_advantages = np.zeros((T, ENVS))
    for env in range(ENVS):
        later = 0.0
        for t in reversed(range(T)):
            if data["dones"][t, env]:
                later = 0.0
            delta = int_rewards[t, env] + args.int_gamma * next_int_values[t, env] - int_values[t, env]
            later = delta + args.int_gamma * args.gae_lambda * later
            int_advantages[t, env] = later
    ppo = reference_ppo_batch(run, rollout, k)
    return {**ppo, "bonus": bonus, "sums": sums, "sums_var": sums_var, "int_rewards": int_rewards,
            "int_values": int_values.ravel(), "next_int_values": next_int_values, "int_advantages": int_advantages.ravel(),
            "int_returns": (int_advantages + int_values).ravel(), "standardized": standardized, "predicted": predicted,
            "policy_advantages": args.ext_coef * ppo["advantages"] + args.int_coef * int_advantages.ravel()}


@pytest.mark.parametrize("norm_adv", [False, True])
def test_drnd_batch_intrinsic_rewards_non_episodic_returns_and_mixed_advantages(norm_adv):
    run = make_run(ppo_drnd_continuous, norm_adv=norm_adv, **DRND_ARGS)
    history = set_drnd_history(run.agent)
    rollout = hand_built_rollout()
    batch = ppo_drnd_continuous.compute_advantages(run, rollout, run.args)
    for k in range(2):
        reference = reference_drnd_batch(run, rollout, history, k)
        close(batch["bonus"][k], reference["bonus"], rtol=1e-4)
        close(batch["int_rewards"][k], reference["int_rewards"], rtol=1e-4)
        close(run.agent.int_discounted_sum[k], reference["sums"][-1], rtol=1e-4)  # carried to the next rollout
        close(run.agent.int_return_rms.var[k, 0], reference["sums_var"], rtol=1e-4)
        close(batch["int_values"][k], reference["int_values"])
        close(batch["int_returns"][k], reference["int_returns"], rtol=1e-4)
        close(batch["returns"][k], reference["returns"])
        close(batch["values"][k], reference["values"])
        # an episodic intrinsic return would drop gamma_int V_int(final observation) at each termination: visible here
        terminal = TERMINATIONS[k] == 1
        assert terminal.any() and (np.abs(run.args.int_gamma * reference["next_int_values"][terminal]) > 1e-3).all()
        expected = reference["policy_advantages"]
        close(batch["advantages"][k], normalized(expected) if norm_adv else expected, rtol=1e-4)
        # the intrinsic part is not negligible beside the extrinsic one
        assert np.abs(run.args.int_coef * reference["int_advantages"]).max() > 0.05


def test_drnd_losses_of_both_value_heads_the_mixed_policy_advantage_and_the_predictor():
    run = make_run(ppo_drnd_continuous, **DRND_ARGS)
    history = set_drnd_history(run.agent)
    rollout = hand_built_rollout()
    batch = ppo_drnd_continuous.compute_advantages(run, rollout, run.args)
    references = [reference_drnd_batch(run, rollout, history, k) for k in range(2)]
    old_actor = copy.deepcopy(run.agent.actor)
    perturb(run.agent.actor, 11, 0.01)
    perturb(run.agent.critic, 12, 0.3)
    mb, index = minibatch(ppo_drnd_continuous, batch)
    losses, stats = ppo_drnd_continuous.ppo_loss(run.agent, mb, run.args)
    generator_states = [generator.get_state() for generator in run.generators]
    predictor_loss = ppo_drnd_continuous.predictor_loss(run, mb, run.args)
    for k, reference in enumerate(references):
        rows = index[k]
        obs, actions = rollout.obs[k, rows].double().numpy(), rollout.actions[k, rows].double().numpy()
        new_log_probs = np_log_prob(run.agent.actor, k, obs, actions)
        old_log_probs = np_log_prob(old_actor, k, obs, actions)
        assert_both_clip_cases(new_log_probs, old_log_probs, run.args.clip_coef)
        surrogate = reference_surrogate(new_log_probs, old_log_probs,
                                        normalized(reference["policy_advantages"])[rows], run.args.clip_coef)
        close(losses["actor"][k], surrogate - run.args.ent_coef * np_entropy(run.agent.actor, k), rtol=1e-4)
        heads = np_network(run.agent.critic, k, obs)
        ext_loss = np.mean((heads["head"][:, 0] - reference["returns"][rows]) ** 2)
        int_loss = np.mean((heads["head_int"][:, 0] - reference["int_returns"][rows]) ** 2)
        assert int_loss > 0.01
        close(stats["value_loss_ext"][k], ext_loss, rtol=1e-4)
        close(stats["value_loss_int"][k], int_loss, rtol=1e-4)
        close(losses["critic"][k], ext_loss + int_loss, rtol=1e-4)
        # the predictor: the first round(0.25 x 6) = 2 samples of the seed's minibatch, each regressed onto one target
        # drawn from the seed's own generator
        size = round(run.args.drnd_update_proportion * len(rows))
        draw = torch.Generator()
        draw.set_state(generator_states[k])
        chosen = torch.randint(run.args.num_targets, (size,), generator=draw).numpy()
        standardized = reference["standardized"][rows[:size]]
        predicted = np_outputs(run.agent.predictor, k, standardized)[-1]
        targets = np_targets(run.agent.targets, k, standardized)
        close(predictor_loss[k], np.mean([np.mean((p - c[i]) ** 2) for p, c, i in zip(predicted, targets, chosen)]),
              rtol=1e-4)


# ---- CB, PPO_ReDo, PPO_SnP: the template's terms as each assembles them, then one update with the method's term ----


PLASTICITY_SCRIPTS = [cb_continuous, ppo_redo_continuous, ppo_snp_continuous]


@pytest.mark.parametrize("module", PLASTICITY_SCRIPTS, ids=lambda m: m.__name__)
def test_advantages_and_losses_of_the_plasticity_baselines(module):
    run = make_run(module)
    rollout = hand_built_rollout()
    batch = module.compute_advantages(run, rollout, run.args)
    references = [reference_ppo_batch(run, rollout, k) for k in range(2)]
    old_actor = copy.deepcopy(run.agent.actor)
    perturb(run.agent.actor, 11, 0.01)
    perturb(run.agent.critic, 12, 0.3)
    mb, index = minibatch(module, batch)
    losses, stats, *activations = module.ppo_loss(run.agent, mb, run.args)
    for k, reference in enumerate(references):
        close(batch["advantages"][k], normalized(reference["advantages"]))
        close(batch["returns"][k], reference["returns"])
        obs, actions = rollout.obs[k, index[k]].double().numpy(), rollout.actions[k, index[k]].double().numpy()
        new_log_probs = np_log_prob(run.agent.actor, k, obs, actions)
        old_log_probs = np_log_prob(old_actor, k, obs, actions)
        assert_both_clip_cases(new_log_probs, old_log_probs, run.args.clip_coef)
        surrogate = reference_surrogate(new_log_probs, old_log_probs, normalized(reference["advantages"])[index[k]],
                                        run.args.clip_coef)
        close(losses["actor"][k], surrogate - run.args.ent_coef * np_entropy(run.agent.actor, k))
        values = np_network(run.agent.critic, k, obs)["head"][:, 0]
        close(losses["critic"][k], np.mean((values - reference["returns"][index[k]]) ** 2))
        if module is cb_continuous:  # the hidden outputs CB hands to generate-and-test: those of this minibatch
            (actor_activations, critic_activations), = activations
            for network, got in ((run.agent.actor, actor_activations), (run.agent.critic, critic_activations)):
                for layer, expected in zip(got, np_network(network, k, obs)["hidden"], strict=True):
                    close(layer[k], expected)


def parameters(network) -> dict:
    return {name: p.detach().double().numpy().copy() for name, p in network.named_parameters()}


def reference_first_adam_step(network, before: dict, learning_rate: float, weight_decay: float = 0.0) -> tuple:
    """The parameters after Adam's first step (torch.optim.Adam's formula, eps 1e-5, L2 weight decay added to the
    gradient) on the clipped gradient the step left in .grad: m_hat = g, v_hat = g^2, so
    theta - lr g / (|g| + eps); and the first moments (1 - beta1) g and second moments (1 - beta2) g^2."""
    stepped, moments = {}, {}
    for name, parameter in network.named_parameters():
        gradient = parameter.grad.double().numpy() + weight_decay * before[name]
        stepped[name] = before[name] - learning_rate * gradient / (np.abs(gradient) + 1e-5)
        moments[name] = {"exp_avg": 0.1 * gradient, "exp_avg_sq": 0.001 * gradient**2}
    return stepped, moments


def one_update(module, prepare=None, **method_args):
    """The script's update on the hand-built batch: one epoch of one minibatch (the whole batch), so each network
    takes exactly one Adam step; ``prepare(agent)`` first edits the fresh agent. Returns the run, the parameters
    before, each seed's generator state before, a copy of the agent before and the update's outputs."""
    run = make_run(module, **method_args)
    if prepare is not None:
        prepare(run.agent)
    batch = module.compute_advantages(run, hand_built_rollout(), run.args)
    before = {name: parameters(getattr(run.agent, name)) for name in ("actor", "critic")}
    generator_states = [generator.get_state() for generator in run.generators]
    pre_step = copy.deepcopy(run.agent)
    outputs = module.update(run, batch, run.args)
    assert run.minibatch_steps.tolist() == [1, 1]
    return run, before, generator_states, pre_step, outputs


def minibatch_obs(run, generator_states, k: int) -> tuple:
    """Seed k's one minibatch (the whole rollout in the order of the seed's own permutation) and the seed's generator
    as it is after drawing that permutation."""
    draw = torch.Generator()
    draw.set_state(generator_states[k])
    permutation = torch.randperm(BATCH, generator=draw)
    return hand_built_rollout().obs[k, permutation].double().numpy(), draw


def test_cb_update_takes_l2_inside_adam_and_scores_units_by_the_minibatchs_contributions():
    """Weight decay 0.5 (so that the L2 term decides the step's sign on many entries), no replacement: every
    parameter ends at Adam's first step on gradient + 0.5 theta, and each hidden unit's utility is the contribution
    of this minibatch: mean |h_j| over its samples (pre-step activations) x mean |W_out[:, j]| (the stepped weights)."""
    weight_decay, decay = 0.5, 0.9
    run, before, generator_states, pre_step, _ = one_update(cb_continuous, weight_decay=weight_decay,
                                                            utility_decay=decay, replacement_rate=0.0)
    for name in ("actor", "critic"):
        network = getattr(run.agent, name)
        stepped, _ = reference_first_adam_step(network, before[name], run.args.learning_rate, weight_decay)
        without_decay, _ = reference_first_adam_step(network, before[name], run.args.learning_rate)
        flipped = sum(int((np.sign(stepped[p] - before[name][p]) != np.sign(without_decay[p] - before[name][p])).sum())
                      for p in stepped)
        assert flipped > 10  # the L2 term changes the step, so the check below sees it
        for p, value in parameters(network).items():
            close(value, stepped[p], rtol=1e-6, atol=1e-7)
        gnt = getattr(run.agent, f"{name}_generate_and_test")
        for k in range(2):
            obs, _ = minibatch_obs(run, generator_states, k)
            hidden = np_network(getattr(pre_step, name), k, obs)["hidden"]
            outgoing = [layer for layer in network.trunk if type(layer).__name__ == "StackedLinear"][1:]
            outgoing.append(network.mean_head if name == "actor" else network.head)
            for layer, (activation, out_layer) in enumerate(zip(hidden, outgoing, strict=True)):
                contribution = np.abs(activation).mean(0) * np.abs(weights(out_layer, k, "weight")).mean(0)
                assert gnt.ages[layer][k].tolist() == [1] * HIDDEN
                # after one step the bias-corrected average is the step's contribution itself
                close(gnt.utilities[layer][k], (1 - decay) * contribution, rtol=1e-5, atol=1e-8)
                close(gnt.bias_corrected_utilities(layer, k), contribution, rtol=1e-5, atol=1e-8)


def test_redo_update_recycles_the_units_dormant_after_the_step_and_steps_everything_else():
    """A unit of each network made dormant by construction (LayerNorm gain 0, shift -1: its ReLU is 0 on every
    input, its gradients 0, so the step keeps it so). After the update (--redo-frequency 1: due after the one step),
    the units whose score (mean |h_j| / the layer's mean of those, on the minibatch, with the stepped parameters) is
    <= tau have fresh orthogonal rows drawn from the seed's generator after its permutation (actor first, hidden
    layers from the last down), bias 0, LayerNorm 1 and 0, zero outgoing weights and zero Adam moments; every other
    entry is Adam's first step."""
    dormant = {"actor": (0, 1, 5), "critic": (1, 0, 2)}  # network: (hidden layer, seed index, unit)

    def make_dormant(agent):
        for name, (layer, k, unit) in dormant.items():
            norm = [m for m in getattr(agent, name).trunk if type(m).__name__ == "StackedLayerNorm"][layer]
            with torch.no_grad():
                norm.weight[k, 0, unit], norm.bias[k, 0, unit] = 0.0, -1.0

    run, before, generator_states, _, outputs = one_update(ppo_redo_continuous, make_dormant, redo_frequency=1)
    draws = [minibatch_obs(run, generator_states, k) for k in range(2)]
    recycled_total = {"actor": [0, 0], "critic": [0, 0]}
    for name in ("actor", "critic"):
        network, optimizer = getattr(run.agent, name), getattr(run.agent, f"{name}_optimizer")
        expected, moments = reference_first_adam_step(network, before[name], run.args.learning_rate)
        stepped_network = copy.deepcopy(network)
        with torch.no_grad():
            for p_name, p in stepped_network.named_parameters():
                p.copy_(torch.from_numpy(expected[p_name]))
        linear_names = [f"trunk.{i}" for i, m in enumerate(network.trunk) if type(m).__name__ == "StackedLinear"]
        linear_names.append("mean_head" if name == "actor" else "head")
        for k, (obs, draw) in enumerate(draws):
            hidden = np_network(stepped_network, k, obs)["hidden"]
            for i in reversed(range(len(hidden))):
                activity = np.abs(hidden[i]).mean(0)
                scores = activity / (activity.mean() + 1e-9)
                units = np.flatnonzero(scores <= run.args.redo_threshold)
                if (i, k) == dormant[name][:2]:
                    assert dormant[name][2] in units
                assert np.abs(scores - run.args.redo_threshold).min() > 1e-4  # no unit on the edge of tau
                if not len(units):
                    continue
                recycled_total[name][k] += len(units)
                incoming, outgoing, norm = linear_names[i], linear_names[i + 1], f"trunk.{3 * i + 1}"
                fresh = torch.nn.init.orthogonal_(torch.empty(expected[f"{incoming}.weight"].shape[1:]), math.sqrt(2),
                                                  generator=draw).double().numpy()
                expected[f"{incoming}.weight"][k, units] = fresh[units]
                entries = [(f"{incoming}.weight", (k, units)), (f"{incoming}.bias", (k, 0, units)),
                           (f"{norm}.weight", (k, 0, units)), (f"{norm}.bias", (k, 0, units)),
                           (f"{outgoing}.weight", (k, slice(None), units))]
                for p_name, entry in entries[1:]:
                    expected[p_name][entry] = 1.0 if p_name == f"{norm}.weight" else 0.0
                for p_name, entry in entries:
                    for key in ("exp_avg", "exp_avg_sq"):
                        moments[p_name][key][entry] = 0.0
        for p_name, p in network.named_parameters():
            close(p, expected[p_name], rtol=1e-6, atol=1e-7)
            for key in ("exp_avg", "exp_avg_sq"):
                close(optimizer.state[p][key], moments[p_name][key], rtol=1e-5, atol=1e-12)
        # the update reports each seed's count of recycled units
        assert [units for _, units, _, _ in outputs["redo"][name]] == recycled_total[name]


def test_snp_update_shrinks_the_stepped_weights_and_adds_the_scaled_fresh_draw():
    """--snp-frequency 1, lambda 0.8, sigma 0.3: after the one Adam step, every linear layer of both networks of both
    seeds is 0.8 x its stepped weights + 0.3 x a fresh draw of its initializer (orthogonal, gain sqrt(2) hidden,
    --policy-head-gain for the policy head, 1 for the value head; bias 0) from the seed's generator after its
    minibatch permutation, the actor's layers first; LayerNorm and log std keep the step."""
    shrink, perturb_scale = 0.8, 0.3
    run, before, generator_states, _, outputs = one_update(ppo_snp_continuous, snp_frequency=1, snp_shrink=shrink,
                                                           snp_perturb=perturb_scale)
    draws = [minibatch_obs(run, generator_states, k)[1] for k in range(2)]
    for name in ("actor", "critic"):
        network = getattr(run.agent, name)
        expected, _ = reference_first_adam_step(network, before[name], run.args.learning_rate)
        linear_names = [f"trunk.{i}" for i, m in enumerate(network.trunk) if type(m).__name__ == "StackedLinear"]
        linear_names.append("mean_head" if name == "actor" else "head")
        gains = [math.sqrt(2)] * (len(linear_names) - 1) + [run.args.policy_head_gain if name == "actor" else 1.0]
        for k, draw in enumerate(draws):
            for layer, gain in zip(linear_names, gains):
                fresh = torch.nn.init.orthogonal_(torch.empty(expected[f"{layer}.weight"].shape[1:]), gain,
                                                  generator=draw).double().numpy()
                expected[f"{layer}.weight"][k] = shrink * expected[f"{layer}.weight"][k] + perturb_scale * fresh
                expected[f"{layer}.bias"][k] = shrink * expected[f"{layer}.bias"][k]
        for p_name, p in network.named_parameters():
            close(p, expected[p_name], rtol=1e-6, atol=1e-7)
        assert outputs["snp_events"][name].tolist() == [1, 1]
