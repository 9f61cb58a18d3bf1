"""References written apart from the scripts, and the checks of the scripts' phase functions against them.

Each reference recomputes what a script's ``compute_advantages``, ``ppo_loss`` and ``update`` should give from the
networks' weights or outputs and the documented formulas, never by calling the scripts' helpers (gae,
probabilistic_gae, nig_nll, ...). Each method's own test file in tests/methods/ runs its script against them; a new
method adds its reference test there, built from these pieces:

- brute_force_gae: GAE, and EPPO's future variance, as double sums straight from the definitions.
- PPO's and EPPO's reference in torch.distributions float64 on a hand-built rollout of two seeds (case_rollout), and
  the checks that tests/methods/test_ppo.py and test_eppo.py run on their cases: assert_batch_equals_the_reference,
  assert_losses_equal_the_reference, assert_update_step_follows_the_reference_gradients and
  assert_truncation_bootstraps_and_termination_does_not.
- The template's terms in numpy float64 with plain loops on one small hand-built rollout (hand_built_rollout,
  make_run, np_network, reference_ppo_batch, reference_first_adam_step, one_update, ...), from which the baselines'
  tests (test_pfo.py, test_ppo_drnd.py, test_cb.py, test_ppo_redo.py, test_ppo_snp.py) add their method's own term;
  assert_template_advantages_and_losses checks the template's advantages and losses as a script assembles them.
"""

import copy
import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import torch
from scipy import stats
from torch.distributions import Gamma, Normal, StudentT

import eppo_continuous
import ppo_continuous

OBS_DIM, ACTION_DIM = 3, 2  # both hand-built rollouts'


# ---- GAE ----


def brute_force_gae(rewards, values, next_values, terminations, dones, gamma, gae_lambda, next_value_vars=None):
    """GAE over a (T, envs) or (T,) rollout as double sums straight from the definitions, env by env (Eq. (1)):

        A_t = sum_{l>=0} (gamma lambda)^l prod_{k<l} (1 - done_{t+k}) delta_{t+l},
        delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t),

    each sum running over step t's own episode, up to the step where it ends (termination or truncation) or the
    buffer does; ``next_values[t]`` is V of step t's true next state (the final one at a truncation). With
    ``next_value_vars`` also EPPO's future variance (Algorithm 1, line 13), a terminal next state adding none:

        S_t = sum_{l>=1} (gamma lambda)^{2l} prod_{k<l-1} (1 - done_{t+k}) (1 - term_{t+l-1}) var[V(s_{t+l})];

    returns A, or (A, S) with ``next_value_vars``."""
    rewards, values, next_values, terminations, dones = (
        np.asarray(x, dtype=np.float64) for x in (rewards, values, next_values, terminations, dones))
    one_env = rewards.ndim == 1
    if one_env:
        rewards, values, next_values, terminations, dones = (
            x[:, None] for x in (rewards, values, next_values, terminations, dones))
    variances = np.zeros_like(rewards) if next_value_vars is None else np.asarray(next_value_vars, np.float64)
    variances = variances.reshape(rewards.shape)
    num_steps, num_envs = rewards.shape
    decay = gamma * gae_lambda
    advantages, future_vars = np.zeros_like(rewards), np.zeros_like(rewards)
    for env in range(num_envs):
        for t in range(num_steps):
            for later in range(t, num_steps):
                terminal = terminations[later, env] == 1.0
                next_value, next_var = (0.0, 0.0) if terminal else (next_values[later, env], variances[later, env])
                advantages[t, env] += decay ** (later - t) * (rewards[later, env] + gamma * next_value
                                                              - values[later, env])
                future_vars[t, env] += decay ** (2 * (later - t + 1)) * next_var
                if dones[later, env] == 1.0:
                    break
    if one_env:
        advantages, future_vars = advantages[:, 0], future_vars[:, 0]
    return advantages if next_value_vars is None else (advantages, future_vars)


# ---- PPO's and EPPO's reference, in torch.distributions float64 ----
#
# PPO's and EPPO's advantages, critic targets, losses and update step against a reference written out here, on a
# hand-built rollout of two seeds whose states, actions, rewards, terminations and truncations differ. The scripts'
# own phase functions are called as a run calls them (compute_advantages, ppo_loss, update); the reference
# recomputes everything from the networks' outputs: GAE and EPPO's advantage variance as brute-force sums over each
# step's future in numpy (float64), the value variance from scipy's Student-t, and the losses with
# torch.distributions in float64 (the policy's Normal, the critic's Student-t NLL and the Normal and Gamma
# hyperpriors, the clipped surrogate by hand), differentiable so that the update's gradients can be checked too.
# A case is a dict of Args changes with num_envs: each flag that changes the math, two seeds each, one or two envs
# per seed (PPO_CASES in test_ppo.py, EPPO_CASES in test_eppo.py).

CASE_SEEDS = (3, 11)
NUM_STEPS = 6
GAMMA, GAE_LAMBDA = 0.9, 0.8  # far from 1, so that every step's discount shows
# The hand-built episode ends per (seed index, env): the steps t whose next state is terminal ("term") or at which
# the time limit cut the episode ("trunc"). The seeds differ; each seed's env 0 (the one of --num-envs 1) has both
# kinds, one of them with a bootstrap at the buffer's end, the other with a termination at its last step.
EPISODE_ENDS = {(0, 0): {1: "term", 3: "trunc"}, (0, 1): {4: "term"},
                (1, 0): {0: "trunc", 2: "trunc", 5: "term"}, (1, 1): {2: "term"}}
# The paper's hyperprior p(m) = N(omega | 0, 100^2) Gam(nu | 5, 1) Gam(alpha - 1 | 5, 1) Gam(beta | 5, 1) (Appendix B)
OMEGA_PRIOR, EVIDENCE_PRIOR = Normal(0.0, 100.0), Gamma(5.0, 1.0)
ADAM_EPS = 1e-5  # make_agent's (CleanRL's)


def case_rollout(num_envs: int) -> SimpleNamespace:
    """A rollout as collect_rollout returns it: (seeds, T * envs, ...) obs, next_obs and actions, (seeds, T, envs)
    rewards, terminations and dones. Each env is a chain of states: next_obs[t] is obs[t + 1] within an episode and
    the episode's own final state at its end, after which a fresh state starts the next episode."""
    shape = (len(CASE_SEEDS), NUM_STEPS, num_envs)
    obs, next_obs = np.zeros((*shape, OBS_DIM), np.float32), np.zeros((*shape, OBS_DIM), np.float32)
    actions = np.zeros((*shape, ACTION_DIM), np.float32)
    rewards, terminations, dones = (np.zeros(shape, np.float32) for _ in range(3))
    for k in range(len(CASE_SEEDS)):
        rng = np.random.default_rng(100 + k)
        for i in range(num_envs):
            ends = EPISODE_ENDS[k, i]
            state = rng.normal(size=OBS_DIM)
            for t in range(NUM_STEPS):
                obs[k, t, i], next_obs[k, t, i] = state, rng.normal(size=OBS_DIM)
                actions[k, t, i] = rng.normal(scale=0.6, size=ACTION_DIM)
                rewards[k, t, i] = rng.normal(loc=0.5, scale=2.0)
                terminations[k, t, i], dones[k, t, i] = ends.get(t) == "term", t in ends
                state = rng.normal(size=OBS_DIM) if t in ends else next_obs[k, t, i]
    as_samples = lambda x: torch.from_numpy(x).reshape(len(CASE_SEEDS), NUM_STEPS * num_envs, x.shape[-1])  # noqa: E731
    return SimpleNamespace(obs=as_samples(obs), next_obs=as_samples(next_obs), actions=as_samples(actions),
                           rewards=torch.from_numpy(rewards), raw_rewards=torch.from_numpy(rewards),
                           terminations=torch.from_numpy(terminations), dones=torch.from_numpy(dones), shape=shape)


def tiny_args(script, num_envs: int, **changes):
    """The script's Args for the hand-built rollout: 8-wide networks and one minibatch of the whole batch."""
    return script.Args(hidden_dim=8, num_steps=NUM_STEPS, num_envs=num_envs, minibatch_size=NUM_STEPS * num_envs,
                       update_epochs=1, gamma=GAMMA, gae_lambda=GAE_LAMBDA, **changes)


def new_agent(script, args):
    generators = [torch.Generator().manual_seed(seed) for seed in CASE_SEEDS]
    return script.make_agent(args, OBS_DIM, ACTION_DIM, generators, torch.device("cpu"))


def perturb_agent(agent, seed: int = 0) -> None:
    """Move every weight of the actor and the critic, so that the ratio leaves [1 - clip, 1 + clip] both ways and the
    new values differ from the batch's."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for network, scale in ((agent.actor, 0.3), (agent.critic, 0.2)):
            for parameter in network.parameters():
                parameter.add_(scale * torch.randn(parameter.shape, generator=generator))


def critic_outputs(agent, obs: torch.Tensor) -> list:
    """The critic's outputs as float64 numpy arrays, (seeds, samples) each: PPO's value; EPPO's omega, nu, alpha,
    beta."""
    with torch.no_grad():
        output = agent.critic(obs)
    return [x.double().numpy() for x in (output if isinstance(output, tuple) else (output,))]


def value_variance(nu, alpha, beta):
    """var[V] of the NIG value: the variance of its Student-t marginal, 2 alpha degrees of freedom, scale
    sqrt(beta (1 + nu) / (nu alpha)) (paper, Sec. 2.2)."""
    return stats.t(df=2 * alpha, scale=np.sqrt(beta * (1 + nu) / (nu * alpha))).var()


def reference_batch(script, agent, rollout, args) -> SimpleNamespace:
    """What compute_advantages must put in the batch, float64 (seeds, T * envs): the advantages before and after
    normalization, the targets, the values and the old log-probabilities. EPPO: the UCB advantage A + kappa
    sqrt(var[A]) with var[A] of Eq. (gae_var) (cor) or (gae_var_ind) (ind), none for mean, and the targets
    R = A_UCB + omega (Algorithm 1, line 19) or A + omega (--no-ucb-in-returns)."""
    shape = rollout.shape
    values, *evidence = critic_outputs(agent, rollout.obs)
    next_values, *next_evidence = critic_outputs(agent, rollout.next_obs)
    is_eppo = script is eppo_continuous
    value_vars = value_variance(*evidence).reshape(shape) if is_eppo else np.zeros(shape)
    next_value_vars = value_variance(*next_evidence).reshape(shape) if is_eppo else np.zeros(shape)
    values, next_values = values.reshape(shape), next_values.reshape(shape)
    rewards, terminations, dones = (x.double().numpy() for x in (rollout.rewards, rollout.terminations, rollout.dones))
    advantages, advantage_vars = np.zeros(shape), np.zeros(shape)
    variant = args.variant if is_eppo else "mean"
    current_weight = {"mean": 0.0, "cor": 1.0, "ind": (1 - GAE_LAMBDA) / (1 + GAE_LAMBDA)}[variant]
    future_weight = 0.0 if variant == "mean" else ((1 - GAE_LAMBDA) / GAE_LAMBDA) ** 2
    for k in range(shape[0]):
        for i in range(shape[2]):
            advantages[k, :, i], future_vars = brute_force_gae(
                *(x[k, :, i] for x in (rewards, values, next_values, terminations, dones)), GAMMA, GAE_LAMBDA,
                next_value_vars=next_value_vars[k, :, i])
            advantage_vars[k, :, i] = current_weight * value_vars[k, :, i] + future_weight * future_vars
    bonus = (args.kappa if is_eppo else 0.0) * np.sqrt(advantage_vars)
    ucb_advantages = advantages + bonus
    returns = (ucb_advantages if not is_eppo or args.ucb_in_returns else advantages) + values
    advantages, ucb_advantages, returns, values, bonus = (
        x.reshape(shape[0], -1) for x in (advantages, ucb_advantages, returns, values, bonus))
    normalized = np.stack([(row - row.mean()) / (row.std(ddof=1) + 1e-8) for row in ucb_advantages])
    with torch.no_grad():
        policy = Normal(agent.actor(rollout.obs).double(), agent.actor.log_std.double().exp())
        old_log_probs = policy.log_prob(rollout.actions.double()).sum(-1)
    return SimpleNamespace(mean_advantages=advantages, raw_advantages=ucb_advantages, bonus=bonus,
                           advantages=normalized if args.norm_adv else ucb_advantages,
                           returns=returns, values=values, old_log_probs=old_log_probs)


def reference_losses(script, agent, rollout, reference, args) -> dict:
    """The losses of one minibatch holding the whole batch, (seeds,) float64 tensors that carry the networks'
    gradients: the clipped surrogate max(-A r, -A clip(r, 1 - eps, 1 + eps)) averaged, minus --ent-coef times the
    policy's entropy; the critic's: PPO's squared error (with --clip-vloss the larger of it and the clipped value's;
    with --joint-optimizer times --vf-coef); EPPO's Student-t NLL plus --xi times -log p(m) averaged (mean), summed
    (sum) or averaged and divided by the minibatch size (once), or the mse control's (omega - R)^2."""
    policy = Normal(agent.actor(rollout.obs).double(), agent.actor.log_std.double().exp())
    ratio = torch.exp(policy.log_prob(rollout.actions.double()).sum(-1) - reference.old_log_probs)
    advantages, returns = torch.from_numpy(reference.advantages), torch.from_numpy(reference.returns)
    clipped_ratio = torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    policy_loss = torch.maximum(-advantages * ratio, -advantages * clipped_ratio).mean(-1)
    entropy = policy.entropy()[:, 0].sum(-1)  # state-independent: the same for every sample
    losses = {"policy_loss": policy_loss, "entropy": entropy, "actor": policy_loss - args.ent_coef * entropy,
              "ratio": ratio.detach()}
    if script is ppo_continuous:
        new_values = agent.critic(rollout.obs).double()
        value_loss = (new_values - returns) ** 2
        if args.clip_vloss:
            old_values = torch.from_numpy(reference.values)
            clipped_values = old_values + torch.clamp(new_values - old_values, -args.clip_coef, args.clip_coef)
            value_loss = torch.maximum(value_loss, (clipped_values - returns) ** 2)
        losses["value_loss"] = value_loss.mean(-1)
        losses["critic"] = losses["value_loss"] * (args.vf_coef if args.joint_optimizer else 1.0)
        return losses
    omega, nu, alpha, beta = (x.double() for x in agent.critic(rollout.obs))
    nll = -StudentT(2 * alpha, omega, torch.sqrt(beta * (1 + nu) / (nu * alpha))).log_prob(returns)
    negative_log_prior = -(OMEGA_PRIOR.log_prob(omega) + EVIDENCE_PRIOR.log_prob(nu)
                           + EVIDENCE_PRIOR.log_prob(alpha - 1) + EVIDENCE_PRIOR.log_prob(beta))
    prior_term = {"mean": negative_log_prior.mean(-1), "sum": negative_log_prior.sum(-1),
                  "once": negative_log_prior.mean(-1) / args.minibatch_size}[args.hyperprior_reduction]
    losses.update(nll=nll.mean(-1), hyperprior=negative_log_prior.mean(-1))
    if args.critic_loss == "mse":
        losses["value_loss"] = ((omega - returns) ** 2).mean(-1)
    else:
        losses["value_loss"] = nll.mean(-1) + args.xi * prior_term
    losses["critic"] = losses["value_loss"] * (args.vf_coef if args.joint_optimizer else 1.0)
    return losses


def case_batch(script, changes):
    """The case's Args, agent, rollout, the script's batch and the reference's (before any update)."""
    args = tiny_args(script, **changes)
    agent, rollout = new_agent(script, args), case_rollout(changes["num_envs"])
    batch = script.compute_advantages(SimpleNamespace(agent=agent), rollout, args)
    return args, agent, rollout, batch, reference_batch(script, agent, rollout, args)


def assert_seedwise_close(actual: torch.Tensor, expected, rtol=1e-5, atol=1e-5, what=""):
    """Each seed on its own (a seed's error is not averaged away by the other's)."""
    expected = torch.as_tensor(expected, dtype=torch.float64)
    for k in range(len(CASE_SEEDS)):
        torch.testing.assert_close(actual[k].double(), expected[k], rtol=rtol, atol=atol,
                                   msg=lambda m, k=k: f"{what}, seed index {k}: {m}")


def new_run(script, agent, args):
    """A Run with what update reads (its per-update fields set by next_iteration, as each iteration sets them)."""
    run = script.Run()
    run.seeds, run.args, run.agent, run.device = list(CASE_SEEDS), args, agent, torch.device("cpu")
    run.generators = [torch.Generator().manual_seed(seed + 1) for seed in CASE_SEEDS]
    run.batch_size, run.seed_rows = args.num_steps * args.num_envs, torch.arange(len(CASE_SEEDS))[:, None]
    run.consecutive_nonfinite = np.zeros(len(CASE_SEEDS), np.int64)
    run.global_step, run.total_steps, run.exit_code, run.iteration = 0, 1, 0, 0
    assert run.next_iteration()
    return run


# The checks of ``script``'s phase functions on one case (a dict of Args changes with num_envs); each method's test
# file calls them with its own cases.


def assert_batch_equals_the_reference(script, changes):
    """compute_advantages: the (UCB) advantages before and after normalization, the targets, the values and the old
    log-probabilities, each seed's its own."""
    args, agent, rollout, batch, reference = case_batch(script, changes)
    assert not np.allclose(reference.raw_advantages[0], reference.raw_advantages[1])  # the seeds' data differ
    assert_seedwise_close(batch["advantages"], reference.advantages, what="advantages")
    assert_seedwise_close(batch["returns"], reference.returns, what="returns")
    # the advantages before normalization, as the targets carry them: R - V is A_UCB (A for PPO and EPPO_mean), or
    # the mean A with --no-ucb-in-returns
    targets_carry = reference.mean_advantages if script is eppo_continuous and not args.ucb_in_returns else \
        reference.raw_advantages
    assert_seedwise_close(batch["returns"] - batch["values"], targets_carry, what="advantages before normalization")
    assert_seedwise_close(batch["values"], reference.values, what="values")
    assert_seedwise_close(batch["old_log_probs"], reference.old_log_probs, what="old log-probs")
    if script is eppo_continuous and args.variant != "mean":  # the bonus is large enough to matter at every step
        assert reference.bonus.min() > 0.05


def assert_losses_equal_the_reference(script, changes):
    """ppo_loss on the batch, with both networks moved since the rollout: the actor's and the critic's losses and
    the logged terms."""
    args, agent, rollout, batch, reference = case_batch(script, changes)
    perturb_agent(agent)
    losses, logged = script.ppo_loss(agent, batch, args)
    with torch.no_grad():
        expected = reference_losses(script, agent, rollout, reference, args)
    # the batch exercises the clip: in each seed ratios outside [1 - eps, 1 + eps], where it binds (the ratio
    # beyond it on the side the advantage pushes to) and where it does not
    ratio, advantages = expected["ratio"].numpy(), reference.advantages
    outside = (ratio > 1 + args.clip_coef) | (ratio < 1 - args.clip_coef)
    binds = ((ratio > 1 + args.clip_coef) & (advantages > 0)) | ((ratio < 1 - args.clip_coef) & (advantages < 0))
    assert outside.any(-1).all() and binds.any() and (outside & ~binds).any()
    for name in ("actor", "critic"):
        assert_seedwise_close(losses[name], expected[name], what=name)
    for name in ("policy_loss", "value_loss", "entropy", *(("nll", "hyperprior") if script is eppo_continuous else ())):
        assert_seedwise_close(logged[name], expected[name], what=name)


def assert_update_step_follows_the_reference_gradients(script, changes):
    """update with one minibatch: every parameter's gradient (kept after the step) is the reference loss's, each
    seed's clipped by its norm over its network (over both with --joint-optimizer) at --max-grad-norm, and the
    step is Adam's first, -lr g / (|g| + eps); the logged means are the reference's losses."""
    args, agent, rollout, batch, reference = case_batch(script, changes)
    perturb_agent(agent)
    before = copy.deepcopy(agent)
    expected = reference_losses(script, before, rollout, reference, args)
    (expected["actor"] + expected["critic"]).sum().backward()
    means = script.update(new_run(script, agent, args), batch, args)

    networks = {"actor": (before.actor, agent.actor), "critic": (before.critic, agent.critic)}
    norms = {name: torch.stack([torch.cat([p.grad[k].flatten() for p in reference_network.parameters()]).norm()
                                for k in range(len(CASE_SEEDS))]) for name, (reference_network, _) in networks.items()}
    if args.joint_optimizer:
        norms = dict.fromkeys(norms, torch.sqrt(norms["actor"] ** 2 + norms["critic"] ** 2))
    assert (torch.stack(list(norms.values())) > args.max_grad_norm).any()  # the clip acts somewhere
    for name, (reference_network, network) in networks.items():
        scale = torch.clamp(args.max_grad_norm / (norms[name] + 1e-6), max=1.0)
        for (parameter_name, old), new in zip(reference_network.named_parameters(), network.parameters()):
            gradient = old.grad * scale.view(-1, *[1] * (old.ndim - 1))
            assert_seedwise_close(new.grad, gradient, rtol=1e-4, atol=1e-6, what=f"{name}.{parameter_name} gradient")
            step = -args.learning_rate * gradient / (gradient.abs() + ADAM_EPS)
            assert_seedwise_close(new.detach() - old.detach(), step, rtol=1e-3, atol=2e-6,
                                  what=f"{name}.{parameter_name} step")
    for name in ("policy_loss", "value_loss"):
        assert_seedwise_close(torch.tensor(means[name]), expected[name].detach(), what=f"logged {name}")


def assert_truncation_bootstraps_and_termination_does_not(script, changes):
    """Moving the final state of a truncated episode moves the advantages before it; moving a terminal state
    moves nothing (its value, and for EPPO its variance, are not used)."""
    args, agent, rollout, batch, _ = case_batch(script, changes)
    num_envs = changes["num_envs"]
    for (k, i), ends in EPISODE_ENDS.items():
        if i >= num_envs:
            continue
        for t, kind in ends.items():
            moved = copy.copy(rollout)
            moved.next_obs = rollout.next_obs.clone()
            moved.next_obs[k, t * num_envs + i] += 5.0
            moved_batch = script.compute_advantages(SimpleNamespace(agent=agent), moved, args)
            same = torch.equal(moved_batch["returns"][k], batch["returns"][k])
            assert same == (kind == "term"), (k, i, t, kind)


# ---- The template's terms, in numpy float64: the reference the baselines' tests build on ----
#
# A script's own compute_advantages, ppo_loss and update run on one small hand-built rollout (two seeds whose data,
# weights, terminations and time-limit truncations differ); the reference recomputes what they should give in numpy
# float64 with plain loops, from the networks' weights and the documented formulas. Here: the networks, the Gaussian
# policy, GAE, PPO's batch and clipped surrogate, Adam's first step, and one whole update of one minibatch; each
# method's test file adds its own term (PFO's feature penalty, DRND's bonus and intrinsic returns, CB's L2 term and
# utilities, ReDo's recycle, SnP's shrink and perturb), and the closed forms of those terms for given inputs are
# tested beside them.

SEEDS = (3, 7)
HIDDEN, T, ENVS = 8, 5, 2
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


# The hand-built rollout and the fake run the phase functions read


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
    ppo_loss and update read (a fresh update's counters, as Run.next_iteration sets them)."""
    args = dataclasses.replace(module.Args(), **SHARED_ARGS, **method_args)
    generators = [torch.Generator().manual_seed(seed) for seed in SEEDS]
    agent = module.make_agent(args, OBS_DIM, ACTION_DIM, generators, torch.device("cpu"))
    return SimpleNamespace(
        args=args, agent=agent, generators=generators, device=torch.device("cpu"), seeds=list(SEEDS),
        seed_rows=torch.arange(2)[:, None], batch_size=BATCH, action_low=-np.ones(ACTION_DIM, np.float32),
        action_high=np.ones(ACTION_DIM, np.float32), consecutive_nonfinite=np.zeros(2, np.int64),
        stats=module.IterationStats(2, torch.device("cpu")))


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


# The reference: networks, Gaussian policy, GAE and PPO's loss, written out in float64


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
    out = {"preactivation": trunk[-2],
           "hidden": [o for o, m in zip(trunk, network.trunk) if type(m).__name__ == "ReLU"]}
    for name in ("mean_head", "head", "head_int"):
        if hasattr(network, name):
            out[name] = np_layer(getattr(network, name), k, trunk[-1])
    return out


def np_log_prob(actor, k: int, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    std = np.exp(weights(actor, k, "log_std")[0])
    return stats.norm.logpdf(actions, loc=np_network(actor, k, obs)["mean_head"], scale=std).sum(-1)


def np_entropy(actor, k: int) -> float:
    return stats.norm.entropy(scale=np.exp(weights(actor, k, "log_std")[0])).sum()


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
    """Seed k's rollout in float64: obs, next_obs and actions (T * envs, ...); rewards, terminations, dones
    (T, envs)."""
    return {name: getattr(rollout, name)[k].double().numpy() for name in
            ("obs", "next_obs", "actions", "rewards", "terminations", "dones")}


def reference_ppo_batch(run, rollout, k: int) -> dict:
    """Seed k's values, old log-probs, GAE advantages (before normalization) and returns, as Algorithm 1 defines
    them."""
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


# ---- Checks and one whole update, for a method built on the template (CB, PPO_ReDo, PPO_SnP) ----


def assert_template_advantages_and_losses(module) -> tuple:
    """``module``'s compute_advantages and ppo_loss, with both networks moved since the rollout, give the template's
    advantages, returns, actor loss (clipped surrogate - ent_coef x entropy) and critic loss, each seed's its own.
    Returns the run, the rollout, each seed's minibatch rows and what ppo_loss returned beyond the losses and the
    statistics (CB: the hidden activations it hands to generate-and-test), for the method's own checks."""
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
    return run, rollout, index, activations


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
    assert run.stats.minibatch_steps.tolist() == [1, 1]
    return run, before, generator_states, pre_step, outputs


def minibatch_obs(run, generator_states, k: int) -> tuple:
    """Seed k's one minibatch (the whole rollout in the order of the seed's own permutation) and the seed's generator
    as it is after drawing that permutation."""
    draw = torch.Generator()
    draw.set_state(generator_states[k])
    permutation = torch.randperm(BATCH, generator=draw)
    return hand_built_rollout().obs[k, permutation].double().numpy(), draw

