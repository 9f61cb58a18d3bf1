"""Tests for ppo_redo_continuous.py: ReDo, recycling dormant neurons (Sokar et al., 2023), on PPO, the script, and its
batch, losses and update against the independent reference of tests/reference_math.py."""

import copy
import dataclasses
import math
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import plasticity_metrics
import ppo_redo_continuous as redo
import reference_math as ref
from tiny_run import (REPO_ROOT, TINY_EVALUATION_STEPS, assert_refused_in_one_line, assert_same_run_state, read_csv,
                      run_script)

OBS_DIM, ACTION_DIM, HIDDEN = 5, 2, 16
SCRIPT = "ppo_redo_continuous.py"
# The flags that make ReDo recycle units inside the tiny runs: the shared end-to-end tests (SIGTERM + resume, seed
# independence, the golden outputs of two seeds) run this script with them (tiny_run.method_event_flags).
# A recycle every 2 minibatch steps: the tiny runs (2 epochs x 2 minibatches per update) recycle in every update.
EVENT_FLAGS = ["--redo-frequency", "2"]
RECYCLING = tuple(EVENT_FLAGS)


# ---- The score and the mask ----


def test_scores_are_mean_abs_activation_over_the_layer_mean():
    # mean |a| per unit over the batch: 0, 1, 2, 5; the layer's mean of those: 2 -> scores 0, 0.5, 1, 2.5
    activation = torch.tensor([[0.0, 1.0, 0.0, 4.0], [0.0, 1.0, 4.0, 6.0]])
    torch.testing.assert_close(redo.dormant_scores(activation), torch.tensor([0.0, 0.5, 1.0, 2.5]))
    assert redo.dormant_mask(activation, 0.0).tolist() == [True, False, False, False]
    assert redo.dormant_mask(activation, 0.5).tolist() == [True, True, False, False]  # <=, the authors' test
    # a layer silent on the whole batch: every unit scores 0 (the authors' + 1e-9), all dormant, nothing non-finite
    assert redo.dormant_mask(torch.zeros(3, 4), 0.0).all()


def test_scores_are_per_seed_and_agree_with_the_repositorys_tau_dormant_metric():
    """With a leading seed axis each seed's scores use its own batch and layer only; the dormant share equals
    plasticity_metrics.tau_dormant_unit_percentage (the same definition, written independently)."""
    torch.manual_seed(0)
    activation = torch.relu(torch.randn(3, 64, 32) + torch.linspace(-3, 1, 32))  # some units almost always 0
    scores = redo.dormant_scores(activation)
    assert scores.shape == (3, 32)
    for k in range(3):
        torch.testing.assert_close(scores[k], redo.dormant_scores(activation[k]))
        for tau in (0.0, 0.025, 0.1, 0.5):
            share = 100.0 * redo.dormant_mask(activation[k], tau).float().mean().item()
            assert share == pytest.approx(plasticity_metrics.tau_dormant_unit_percentage(activation[k], tau))
    assert 0 < redo.dormant_mask(activation, 0.1).sum() < activation[..., 0, :].numel()  # the test is not vacuous


# ---- The recycling ----


def make_run(seeds=(1, 2), frequency=2, threshold=0.025, obs=None):
    """An agent of one stacked copy per seed as the script makes it (small widths), trained for ``frequency``
    minibatch steps on ``obs`` (seeds, batch, OBS_DIM; random by default) so that every Adam moment is non-zero,
    inside the run fields recycle_dormant_units reads."""
    args = dataclasses.replace(redo.Args(), hidden_dim=HIDDEN, redo_frequency=frequency, redo_threshold=threshold)
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    agent = redo.make_agent(args, OBS_DIM, ACTION_DIM, generators, torch.device("cpu"))
    if obs is None:
        obs = torch.randn(len(seeds), 64, OBS_DIM, generator=torch.Generator().manual_seed(0))
    for _ in range(frequency):
        loss = agent.critic(obs).pow(2).mean(-1).sum() + agent.actor(obs).pow(2).mean((-2, -1)).sum()
        for optimizer in (agent.actor_optimizer, agent.critic_optimizer):
            optimizer.zero_grad()
        loss.backward()
        agent.actor_optimizer.step()
        agent.critic_optimizer.step()
    return SimpleNamespace(agent=agent, generators=generators), args, obs


def snapshot(network, optimizer):
    """Every parameter, Adam moment and step count, cloned."""
    state = {f"param.{name}": p.detach().clone() for name, p in network.named_parameters()}
    for name, p in network.named_parameters():
        state.update({f"adam.{name}.{key}": value.clone() for key, value in optimizer.state[p].items()})
    return state


def make_dormant(network, layer: int, seed_index: int, unit: int) -> None:
    """Silence one unit by construction: LayerNorm gain 0 and shift -1 give it the ReLU output relu(-1) = 0 for
    every input (its LayerNorm parameters are its effective bias: the Linear bias is normalized away)."""
    layer_norm = [m for m in network.trunk if isinstance(m, redo.StackedLayerNorm)][layer]
    with torch.no_grad():
        layer_norm.weight[seed_index, 0, unit] = 0.0
        layer_norm.bias[seed_index, 0, unit] = -1.0


@pytest.mark.parametrize("name", ["critic", "actor"])
@pytest.mark.parametrize("layer", [0, 1])
def test_a_dormant_unit_is_recycled_and_nothing_else_changes(name, layer):
    """Seed 2's unit 5 of a hidden layer is dormant by construction. Every tau-dormant unit (it, and any the random
    network has of itself) gets its row of a fresh orthogonal matrix drawn from its seed's generator, bias 0,
    LayerNorm 1/0, zero outgoing weights (the next layer's column), and zero Adam moments on all of those; every
    other entry of both seeds, and every step count, stays bit-identical."""
    run, args, obs = make_run()
    network, optimizer = getattr(run.agent, name), getattr(run.agent, f"{name}_optimizer")
    k, unit = 1, 5
    make_dormant(network, layer, k, unit)
    masks = [[redo.dormant_mask(a[j], args.redo_threshold) for a in network.hidden_activations(obs)] for j in (0, 1)]
    assert masks[k][layer][unit] and sum(int(m.sum()) for m in masks[k]) < 2 * HIDDEN - 2  # some stay
    before = snapshot(network, optimizer)
    linear = [n for n, m in network.named_modules() if isinstance(m, redo.StackedLinear)]
    # The expected state, built as the authors' code orders it: fresh incoming rows, biases and LayerNorms first,
    # then zero outgoing columns (an entry between two recycled units ends 0); fresh matrices are drawn per seed
    # from its generator, from the last hidden layer down, none for a layer without a dormant unit.
    expected, outgoing, zeroed = {key: value.clone() for key, value in before.items()}, [], []
    expected_generators = []
    for j, generator in enumerate(run.generators):
        copy = torch.Generator()
        copy.set_state(generator.get_state())
        for i in reversed(range(2)):
            units = torch.nonzero(masks[j][i])[:, 0]
            if not len(units):
                continue
            weight = expected[f"param.{linear[i]}.weight"]
            weight[j, units] = torch.nn.init.orthogonal_(torch.empty(weight.shape[1:]), math.sqrt(2),
                                                         generator=copy)[units]
            zeroed.append((f"{linear[i]}.weight", (j, units)))
            for parameter, value in ((f"{linear[i]}.bias", 0.0), (f"trunk.{3 * i + 1}.weight", 1.0),
                                     (f"trunk.{3 * i + 1}.bias", 0.0)):
                expected[f"param.{parameter}"][j, 0, units] = value
                zeroed.append((parameter, (j, 0, units)))
            outgoing.append((f"{linear[i + 1]}.weight", (j, slice(None), units)))
        expected_generators.append(copy.get_state())
    for parameter, index in outgoing:
        expected[f"param.{parameter}"][index] = 0.0
    for parameter, index in zeroed + outgoing:
        for key in ("exp_avg", "exp_avg_sq"):
            expected[f"adam.{parameter}.{key}"][index] = 0.0
    # the constructed unit was active in training: its moments were non-zero (to its outgoing weights: those that
    # feed an active unit), so their zeros above are the recycle's
    for parameter, index in ((f"{linear[layer]}.weight", (k, unit)), (f"{linear[layer]}.bias", (k, 0, unit)),
                             (f"trunk.{3 * layer + 1}.bias", (k, 0, unit)), (f"{linear[layer + 1]}.weight", (k, 0))):
        for key in ("exp_avg", "exp_avg_sq"):
            moments = before[f"adam.{parameter}.{key}"][index]
            assert torch.all(moments != 0 if parameter != f"{linear[layer + 1]}.weight" else moments[unit] != 0)

    recycles = redo.recycle_dormant_units(run, name, obs, np.array([True, True]), args)

    dormant = [sum(int(m.sum()) for m in masks[j]) for j in (0, 1)]
    assert [r[:3] for r in recycles] == [(j, dormant[j], pytest.approx(100 * dormant[j] / (2 * HIDDEN)))
                                         for j in (0, 1)]
    assert recycles[k][3] < recycles[k][2]
    assert all(torch.equal(g.get_state(), e) for g, e in zip(run.generators, expected_generators))
    after = snapshot(network, optimizer)
    for key in before:  # bit for bit: the recycled entries as above, everything else and every step count as before
        assert torch.equal(after[key], expected[key]), key
    # the constructed unit fires on the batch it was silent on
    assert not redo.dormant_mask(network.hidden_activations(obs)[layer][k], args.redo_threshold)[unit]


def test_recycling_waits_for_each_seeds_own_step_count():
    """Only a seed that stepped and whose network has taken a multiple of --redo-frequency steps is scored."""
    run, args, obs = make_run(frequency=3)
    for name in ("critic", "actor"):
        make_dormant(getattr(run.agent, name), 0, 0, 2)
        make_dormant(getattr(run.agent, name), 0, 1, 2)

    def recycled(name, stepped, frequency):  # (seed index, units recycled) of each seed scored
        recycles = redo.recycle_dormant_units(run, name, obs, np.array(stepped),
                                              dataclasses.replace(args, redo_frequency=frequency))
        return [(int(k), units) for k, units, _, _ in recycles]

    # 3 steps taken: due at frequency 3 and 1, not at 2; seed 1 skipped this step (a non-finite loss): not scored
    assert [k for k, units in recycled("critic", [False, True], 3) if units >= 1] == [1]
    assert recycled("actor", [True, True], 2) == []
    assert [k for k, units in recycled("actor", [True, True], 1) if units >= 1] == [0, 1]
    assert recycled("actor", [True, True], 1) == [(0, 0), (1, 0)]  # scored again: nothing dormant is left


def test_a_seed_recycles_exactly_as_it_does_alone():
    """Seed 2 beside seed 1 ends bit-identical to seed 2 alone: parameters, moments and its generator."""
    pair, args, obs = make_run(seeds=(1, 2))
    alone, _, _ = make_run(seeds=(2,), obs=obs[1:])
    for run in (pair, alone):
        make_dormant(run.agent.critic, 1, len(run.generators) - 1, 7)
    redo.recycle_dormant_units(pair, "critic", obs, np.array([True, True]), args)
    redo.recycle_dormant_units(alone, "critic", obs[1:], np.array([True]), args)
    a, b = snapshot(pair.agent.critic, pair.agent.critic_optimizer), snapshot(alone.agent.critic,
                                                                              alone.agent.critic_optimizer)
    for key in a:
        assert torch.equal(a[key][1:], b[key]), key
    assert torch.equal(pair.generators[1].get_state(), alone.generators[0].get_state())


# ---- The script, end to end ----


def scalars(run_dir, tag) -> dict:
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {event.step: event.value for event in events.Scalars(tag)}


@pytest.fixture(scope="module")
def recycling_run(tmp_path_factory):
    """Seeds 1 and 2 in one process, recycling every 2 minibatch steps; the odd evaluation count (3) and
    minibatch (32) put a seed's slices of stacked tensors at misaligned offsets."""
    run_dir = tmp_path_factory.mktemp("redo") / "pair"
    result = run_script(SCRIPT, run_dir / "seed{seed}", "--num-seeds", "2", "--eval-episodes", "3",
                        "--minibatch-size", "32", *RECYCLING)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.mark.parametrize("seed", [1, 2])
def test_tiny_run_recycles_and_the_dormant_share_drops_at_each_recycle(recycling_run, seed):
    seed_dir = recycling_run / f"seed{seed}"
    assert [(int(r["global_step"]), int(r["task"])) for r in read_csv(seed_dir / "evaluations.csv")] == \
        TINY_EVALUATION_STEPS
    for name in ("actor", "critic"):
        units = scalars(seed_dir, f"redo/{name}_recycled_units")
        before = scalars(seed_dir, f"redo/{name}_dormant_percent_before")
        after = scalars(seed_dir, f"redo/{name}_dormant_percent_after")
        # 3 updates of 8 minibatch steps: 4 recycles each, logged as the update's total and means
        assert list(units) == list(before) == list(after) == [128, 256, 384]
        assert sum(units.values()) > 0 and all(u == int(u) >= 0 for u in units.values())
        for step, recycled in units.items():
            if recycled:  # the recycled units fire on the batch they were found silent on
                assert after[step] < before[step], (name, step)
            else:  # nothing recycled, nothing changed
                assert after[step] == before[step], (name, step)


def test_a_seed_does_not_depend_on_the_seed_beside_it_through_recycles(recycling_run, tmp_path):
    """Seed 2 trained alone (--seed 2) equals seed 2 trained beside seed 1 (--seed 1 --num-seeds 2)."""
    result = run_script(SCRIPT, tmp_path / "alone" / "seed{seed}", "--seed", "2", "--eval-episodes", "3",
                        "--minibatch-size", "32", *RECYCLING)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sum(scalars(tmp_path / "alone" / "seed2", "redo/critic_recycled_units").values()) > 0
    assert_same_run_state(recycling_run / "seed2", tmp_path / "alone" / "seed2")
    for name in ("actor", "critic"):  # and the same recycles
        assert scalars(recycling_run / "seed2", f"redo/{name}_recycled_units") == \
            scalars(tmp_path / "alone" / "seed2", f"redo/{name}_recycled_units")


def test_without_a_due_recycle_the_script_is_ppo(tmp_path):
    """A period longer than the run: no scoring, no recycle, the same evaluations as ppo_continuous.py (the copy
    adds nothing else)."""
    no_recycle = run_script(SCRIPT, tmp_path / "redo", "--redo-frequency", "1000000")
    ppo = run_script("ppo_continuous.py", tmp_path / "ppo")
    assert no_recycle.returncode == 0 and ppo.returncode == 0, (no_recycle.stderr[-2000:], ppo.stderr[-2000:])
    with open(tmp_path / "redo" / "evaluations.csv") as a, open(tmp_path / "ppo" / "evaluations.csv") as b:
        assert a.read() == b.read()
    assert set(scalars(tmp_path / "redo", "redo/critic_recycled_units").values()) == {0.0}
    assert '"method": "PPO_ReDo"' in (tmp_path / "redo" / "config.json").read_text()


BAD_FLAGS = [("--redo-threshold", "-0.1"), ("--redo-threshold", "nan"), ("--redo-threshold", "inf"),
             ("--redo-frequency", "0"), ("--redo-frequency", "-5"), ("--activation", "tanh")]


@pytest.mark.parametrize("flag, value", BAD_FLAGS)
def test_bad_redo_flags_exit_2_naming_the_flag(flag, value, tmp_path):
    assert_refused_in_one_line(SCRIPT, tmp_path / "run", [flag, value], flag)
    field = flag[2:].replace("-", "_")
    with pytest.raises(ValueError, match=flag):
        redo.validate_args(dataclasses.replace(redo.Args(), **{field: type(getattr(redo.Args(), field))(value)}))


def test_help_lists_the_redo_flags_and_importing_has_no_side_effects(tmp_path):
    result = run_script(SCRIPT, tmp_path, "--help", tiny=False, timeout=120)
    assert "--redo-threshold" in result.stdout and "--redo-frequency" in result.stdout
    imported = subprocess.run([sys.executable, "-c", "import ppo_redo_continuous"], cwd=tmp_path, text=True,
                              capture_output=True, env={**os.environ, "PYTHONPATH": REPO_ROOT}, timeout=120)
    assert imported.returncode == 0 and imported.stdout == "", imported.stderr[-2000:]
    assert os.listdir(tmp_path) == []


# ---- Against the independent reference (tests/reference_math.py): the template's terms as ReDo assembles them,
# then one whole update with ReDo's recycle of the units tau-dormant after the step ----


def test_template_advantages_and_losses_equal_the_reference():
    """The template's advantages, returns and losses as ppo_redo_continuous.py's compute_advantages and ppo_loss
    assemble them (reference_math.assert_template_advantages_and_losses)."""
    ref.assert_template_advantages_and_losses(redo)


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

    run, before, generator_states, _, outputs = ref.one_update(redo, make_dormant, redo_frequency=1)
    draws = [ref.minibatch_obs(run, generator_states, k) for k in range(2)]
    recycled_total = {"actor": [0, 0], "critic": [0, 0]}
    for name in ("actor", "critic"):
        network, optimizer = getattr(run.agent, name), getattr(run.agent, f"{name}_optimizer")
        expected, moments = ref.reference_first_adam_step(network, before[name], run.args.learning_rate)
        stepped_network = copy.deepcopy(network)
        with torch.no_grad():
            for p_name, p in stepped_network.named_parameters():
                p.copy_(torch.from_numpy(expected[p_name]))
        linear_names = [f"trunk.{i}" for i, m in enumerate(network.trunk) if type(m).__name__ == "StackedLinear"]
        linear_names.append("mean_head" if name == "actor" else "head")
        for k, (obs, draw) in enumerate(draws):
            hidden = ref.np_network(stepped_network, k, obs)["hidden"]
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
            ref.close(p, expected[p_name], rtol=1e-6, atol=1e-7)
            for key in ("exp_avg", "exp_avg_sq"):
                ref.close(optimizer.state[p][key], moments[p_name][key], rtol=1e-5, atol=1e-12)
        # the update reports each seed's count of recycled units
        assert [units for _, units, _, _ in outputs["redo"][name]] == recycled_total[name]
