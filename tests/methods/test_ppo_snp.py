"""Tests for ppo_snp_continuous.py: Shrink & Perturb (Ash & Adams, 2020) on PPO, its closed form, the script, and its
update against the independent reference of tests/reference_math.py. The shared end-to-end tests
(tests/plumbing/test_all_scripts.py: resume, seed independence, non-finite steps, bad input) run on it too, with
EVENT_FLAGS below making its events visible (lambda 0.9, sigma 0.1 every 2 steps)."""

import dataclasses
import math
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import ppo_snp_continuous as snp
import reference_math as ref
from tiny_run import REPO_ROOT, TINY_EVALUATION_STEPS, read_csv, run_command, run_script

# The flags that make SnP shrink and perturb (lambda 0.9, sigma 0.1 every 2 steps) inside the tiny runs: the shared
# end-to-end tests (SIGTERM + resume, seed independence, the golden outputs of two seeds) run this script with them
# (tiny_run.method_event_flags).
EVENT_FLAGS = ["--snp-frequency", "2", "--snp-shrink", "0.9", "--snp-perturb", "0.1"]
OBS_DIM, ACTION_DIM, HIDDEN = 5, 2, 16
SCRIPT = "ppo_snp_continuous.py"


def make_agent(seeds=(1, 2), **flags):
    args = dataclasses.replace(snp.Args(), hidden_dim=HIDDEN, **flags)
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    return snp.make_agent(args, OBS_DIM, ACTION_DIM, generators, torch.device("cpu")), args, generators


def linear_layers(network) -> list:
    layers = snp.hidden_layers(network)
    return [incoming for incoming, _, _ in layers] + [layers[-1][2]]


@pytest.mark.parametrize("init", ["orthogonal", "torch"])
def test_one_shrink_and_perturb_step_is_its_closed_form_for_one_seed_only(init):
    """theta_k <- lambda theta_k + sigma theta_fresh, theta_fresh the layer's initializer drawn from seed k's
    generator (here the policy head: gain 0.01); seed 0's slice and every other layer are untouched, bit for bit."""
    agent, args, _ = make_agent(init=init)
    head = agent.actor.mean_head
    before = {name: p.detach().clone() for name, p in agent.actor.named_parameters()}
    generator = torch.Generator().manual_seed(123)
    expected_weight, expected_bias = snp.fresh_draw(head, torch.Generator().manual_seed(123))
    snp.shrink_perturb(head, generator, 1, 0.75, 0.25)
    assert torch.equal(head.weight[1], 0.75 * before["mean_head.weight"][1] + 0.25 * expected_weight)
    assert torch.equal(head.bias[1, 0], 0.75 * before["mean_head.bias"][1, 0] + 0.25 * expected_bias)
    assert torch.equal(head.weight[0], before["mean_head.weight"][0])
    if init == "orthogonal":  # the fresh head is the head's own initializer: rows of norm 0.01
        assert torch.allclose(expected_weight.norm(dim=1), torch.full((ACTION_DIM,), 0.01))
    for name, p in agent.actor.named_parameters():
        if not name.startswith("mean_head."):
            assert torch.equal(p, before[name]), name


def test_each_seed_shrinks_and_perturbs_on_its_own_step_count():
    """With --snp-frequency 2, a seed whose second step was skipped (non-finite) is not due after two steps, and
    only the due seeds' linear layers move (all of them, hidden and head); LayerNorm and log std are left alone."""
    agent, args, generators = make_agent(snp_frequency=2)
    obs = torch.randn(2, 32, OBS_DIM, generator=torch.Generator().manual_seed(0))
    for stepping in (None, np.array([True, False])):
        agent.critic_optimizer.zero_grad()
        agent.critic(obs).pow(2).mean(-1).sum().backward()
        agent.critic_optimizer.step(stepping)
    assert agent.critic_optimizer.steps_taken().tolist() == [2, 1]
    before = {name: p.detach().clone() for name, p in agent.critic.named_parameters()}
    run = SimpleNamespace(agent=agent, generators=generators)
    due = snp.shrink_perturb_when_due(run, "critic", np.array([True, False]), args)
    assert due.tolist() == [1, 0]
    layers = {id(layer) for layer in linear_layers(agent.critic)}
    for name, p in agent.critic.named_parameters():
        module = agent.critic.get_submodule(name.rsplit(".", 1)[0])
        assert torch.equal(p[1], before[name][1]), name  # the seed that was not due
        assert torch.equal(p[0], before[name][0]) != (id(module) in layers), name  # seed 0: exactly its linears
    assert len(layers) == 3


@pytest.fixture(scope="module")
def snp_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("snp") / "seed{seed}"
    result = run_script(SCRIPT, run_dir, "--num-seeds", "2", *EVENT_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.mark.parametrize("seed", [1, 2])
def test_tiny_run_logs_every_shrink_and_perturb(snp_run, seed):
    """2 epochs x 2 minibatches per update and --snp-frequency 2: two events per network and update, logged as
    snp/ tags; the evaluations follow the paper's protocol."""
    run_dir = str(snp_run).replace("{seed}", str(seed))
    assert [(int(r["global_step"]), int(r["task"])) for r in read_csv(os.path.join(run_dir, "evaluations.csv"))] == \
        TINY_EVALUATION_STEPS
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    for name in ("actor", "critic"):
        # 4 rollouts of 128 steps; the last one ends the run, so no update follows it (main)
        assert [event.value for event in events.Scalars(f"snp/{name}_events")] == [2.0] * 3


@pytest.mark.parametrize("flag,value", [("--snp-frequency", "0"), ("--snp-shrink", "1.5"), ("--snp-shrink", "0"),
                                        ("--snp-perturb", "-0.1"), ("--snp-perturb", "nan")])
def test_bad_snp_flags_exit_2_naming_the_flag(flag, value, tmp_path):
    result = run_script(SCRIPT, tmp_path / "run", flag, value, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert (result.stderr.startswith("error: ") and flag in result.stderr
            and len(result.stderr.strip().splitlines()) == 1)


def test_help_lists_the_snp_flags_and_importing_has_no_side_effects():
    result = run_command([sys.executable, os.path.join(REPO_ROOT, SCRIPT), "--help"], REPO_ROOT, timeout=120)
    assert result.returncode == 0 and all(f in result.stdout
                                          for f in ("--snp-frequency", "--snp-shrink", "--snp-perturb"))
    assert snp.method_name(snp.Args()) == "PPO_SnP"


# ---- Against the independent reference (tests/reference_math.py): the template's terms as SnP assembles them, then
# one whole update followed by theta <- lambda theta_stepped + sigma theta_fresh ----


def test_template_advantages_and_losses_equal_the_reference():
    """The template's advantages, returns and losses as ppo_snp_continuous.py's compute_advantages and ppo_loss
    assemble them (reference_math.assert_template_advantages_and_losses)."""
    ref.assert_template_advantages_and_losses(snp)


def test_snp_update_shrinks_the_stepped_weights_and_adds_the_scaled_fresh_draw():
    """--snp-frequency 1, lambda 0.8, sigma 0.3: after the one Adam step, every linear layer of both networks of both
    seeds is 0.8 x its stepped weights + 0.3 x a fresh draw of its initializer (orthogonal, gain sqrt(2) hidden,
    --policy-head-gain for the policy head, 1 for the value head; bias 0) from the seed's generator after its
    minibatch permutation, the actor's layers first; LayerNorm and log std keep the step."""
    shrink, perturb_scale = 0.8, 0.3
    run, before, generator_states, _, outputs = ref.one_update(snp, snp_frequency=1, snp_shrink=shrink,
                                                               snp_perturb=perturb_scale)
    draws = [ref.minibatch_obs(run, generator_states, k)[1] for k in range(2)]
    for name in ("actor", "critic"):
        network = getattr(run.agent, name)
        expected, _ = ref.reference_first_adam_step(network, before[name], run.args.learning_rate)
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
            ref.close(p, expected[p_name], rtol=1e-6, atol=1e-7)
        assert outputs["snp_events"][name].tolist() == [1, 1]
