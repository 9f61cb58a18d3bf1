"""PPO's and EPPO's advantages, critic targets, losses and update step against a reference written out here
(issue 48, item 1), on a hand-built rollout of two seeds whose states, actions, rewards, terminations and truncations
differ. The scripts' own phase functions are called as a run calls them (compute_advantages, ppo_loss, update); the
reference recomputes everything from the networks' outputs: GAE and EPPO's advantage variance as brute-force sums
over each step's future in numpy (float64), the value variance from scipy's Student-t, and the losses with
torch.distributions in float64 (the policy's Normal, the critic's Student-t NLL and the Normal and Gamma hyperpriors,
the clipped surrogate by hand), differentiable so that the update's gradients can be checked too. No helper of the
scripts (gae, probabilistic_gae, nig_nll, ...) enters the reference."""

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy import stats
from torch.distributions import Gamma, Normal, StudentT

import eppo_continuous
import ppo_continuous
from reference_math import brute_force_gae

SEEDS = (3, 11)
OBS_DIM, ACTION_DIM, NUM_STEPS = 3, 2, 6
GAMMA, GAE_LAMBDA = 0.9, 0.8  # far from 1, so that every step's discount shows
# The hand-built episode ends per (seed index, env): the steps t whose next state is terminal ("term") or at which
# the time limit cut the episode ("trunc"). The seeds differ; each seed's env 0 (the one of --num-envs 1) has both
# kinds, one of them with a bootstrap at the buffer's end, the other with a termination at its last step.
EPISODE_ENDS = {(0, 0): {1: "term", 3: "trunc"}, (0, 1): {4: "term"},
                (1, 0): {0: "trunc", 2: "trunc", 5: "term"}, (1, 1): {2: "term"}}
# The paper's hyperprior p(m) = N(omega | 0, 100^2) Gam(nu | 5, 1) Gam(alpha - 1 | 5, 1) Gam(beta | 5, 1) (Appendix B)
OMEGA_PRIOR, EVIDENCE_PRIOR = Normal(0.0, 100.0), Gamma(5.0, 1.0)
ADAM_EPS = 1e-5  # make_agent's (CleanRL's)


def hand_built_rollout(num_envs: int) -> SimpleNamespace:
    """A rollout as collect_rollout returns it: (seeds, T * envs, ...) obs, next_obs and actions, (seeds, T, envs)
    rewards, terminations and dones. Each env is a chain of states: next_obs[t] is obs[t + 1] within an episode and
    the episode's own final state at its end, after which a fresh state starts the next episode."""
    shape = (len(SEEDS), NUM_STEPS, num_envs)
    obs, next_obs = np.zeros((*shape, OBS_DIM), np.float32), np.zeros((*shape, OBS_DIM), np.float32)
    actions = np.zeros((*shape, ACTION_DIM), np.float32)
    rewards, terminations, dones = (np.zeros(shape, np.float32) for _ in range(3))
    for k in range(len(SEEDS)):
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
    as_samples = lambda x: torch.from_numpy(x).reshape(len(SEEDS), NUM_STEPS * num_envs, x.shape[-1])  # noqa: E731
    return SimpleNamespace(obs=as_samples(obs), next_obs=as_samples(next_obs), actions=as_samples(actions),
                           rewards=torch.from_numpy(rewards), raw_rewards=torch.from_numpy(rewards),
                           terminations=torch.from_numpy(terminations), dones=torch.from_numpy(dones), shape=shape)


def tiny_args(script, num_envs: int, **changes):
    """The script's Args for the hand-built rollout: 8-wide networks and one minibatch of the whole batch."""
    return script.Args(hidden_dim=8, num_steps=NUM_STEPS, num_envs=num_envs, minibatch_size=NUM_STEPS * num_envs,
                       update_epochs=1, gamma=GAMMA, gae_lambda=GAE_LAMBDA, **changes)


def new_agent(script, args):
    generators = [torch.Generator().manual_seed(seed) for seed in SEEDS]
    return script.make_agent(args, OBS_DIM, ACTION_DIM, generators, torch.device("cpu"))


def perturb(agent, seed: int = 0) -> None:
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


# The cases: each flag that changes the math, two seeds each, one or two envs per seed.
PPO_CASES = {"defaults": dict(num_envs=2),
             "entropy-clip-vloss-joint": dict(num_envs=1, ent_coef=0.05, clip_vloss=True, joint_optimizer=True),
             "raw-advantages": dict(num_envs=2, norm_adv=False)}
EPPO_CASES = {"ind": dict(num_envs=2, variant="ind", kappa=0.7),
              "cor-entropy-summed-prior": dict(num_envs=1, variant="cor", kappa=0.7, ent_coef=0.05, xi=0.3,
                                               hyperprior_reduction="sum"),
              "mean-prior-once": dict(num_envs=2, variant="mean", kappa=0.0, hyperprior_reduction="once"),
              "ind-no-ucb-in-returns-mse": dict(num_envs=2, variant="ind", kappa=0.7, ucb_in_returns=False,
                                                critic_loss="mse"),
              "cor-raw-advantages-joint": dict(num_envs=2, variant="cor", kappa=1.5, norm_adv=False,
                                               joint_optimizer=True)}
CASES = [pytest.param(ppo_continuous, changes, id=f"ppo-{name}") for name, changes in PPO_CASES.items()] + [
    pytest.param(eppo_continuous, changes, id=f"eppo-{name}") for name, changes in EPPO_CASES.items()]


def case_batch(script, changes):
    """The case's Args, agent, rollout, the script's batch and the reference's (before any update)."""
    args = tiny_args(script, **changes)
    agent, rollout = new_agent(script, args), hand_built_rollout(changes["num_envs"])
    batch = script.compute_advantages(SimpleNamespace(agent=agent), rollout, args)
    return args, agent, rollout, batch, reference_batch(script, agent, rollout, args)


def assert_seedwise_close(actual: torch.Tensor, expected, rtol=1e-5, atol=1e-5, what=""):
    """Each seed on its own (a seed's error is not averaged away by the other's)."""
    expected = torch.as_tensor(expected, dtype=torch.float64)
    for k in range(len(SEEDS)):
        torch.testing.assert_close(actual[k].double(), expected[k], rtol=rtol, atol=atol,
                                   msg=lambda m, k=k: f"{what}, seed index {k}: {m}")


@pytest.mark.parametrize("script, changes", CASES)
def test_batch_advantages_and_targets_equal_the_reference(script, changes):
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


@pytest.mark.parametrize("script, changes", CASES)
def test_losses_equal_the_reference(script, changes):
    """ppo_loss on the batch, with both networks moved since the rollout: the actor's and the critic's losses and
    the logged terms."""
    args, agent, rollout, batch, reference = case_batch(script, changes)
    perturb(agent)
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


def new_run(script, agent, args):
    """A Run with what update reads (its per-update fields set by iterating, as each iteration sets them)."""
    run = script.Run()
    run.seeds, run.args, run.agent, run.device = list(SEEDS), args, agent, torch.device("cpu")
    run.generators = [torch.Generator().manual_seed(seed + 1) for seed in SEEDS]
    run.batch_size, run.seed_rows = args.num_steps * args.num_envs, torch.arange(len(SEEDS))[:, None]
    run.consecutive_nonfinite = np.zeros(len(SEEDS), np.int64)
    run.global_step, run.total_steps, run.exit_code, run.iteration = 0, 1, 0, 0
    assert run.iterating()
    return run


@pytest.mark.parametrize("script, changes", CASES)
def test_one_update_step_follows_the_reference_gradients(script, changes):
    """update with one minibatch: every parameter's gradient (kept after the step) is the reference loss's, each
    seed's clipped by its norm over its network (over both with --joint-optimizer) at --max-grad-norm, and the
    step is Adam's first, -lr g / (|g| + eps); the logged means are the reference's losses."""
    args, agent, rollout, batch, reference = case_batch(script, changes)
    perturb(agent)
    before = copy.deepcopy(agent)
    expected = reference_losses(script, before, rollout, reference, args)
    (expected["actor"] + expected["critic"]).sum().backward()
    means = script.update(new_run(script, agent, args), batch, args)

    networks = {"actor": (before.actor, agent.actor), "critic": (before.critic, agent.critic)}
    norms = {name: torch.stack([torch.cat([p.grad[k].flatten() for p in reference_network.parameters()]).norm()
                                for k in range(len(SEEDS))]) for name, (reference_network, _) in networks.items()}
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


@pytest.mark.parametrize("script, changes", [CASES[0], CASES[3]])
def test_truncation_bootstraps_from_the_final_state_and_termination_does_not(script, changes):
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
