"""Tests for cb_continuous.py: continual backpropagation's generate-and-test (Dohare et al., 2024) and the script."""

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import cb_continuous as cb
from cb_continuous import Actor, Critic, GenerateAndTest, contribution_utility
from tiny_run import TINY_EVALUATION_STEPS, read_csv, run_script

OBS_DIM, ACTION_DIM, HIDDEN = 5, 2, 8


def critic_with_generate_and_test(seed=0, **kwargs):
    """A small critic, its Adam optimizer and a generate-and-test over it (every unit mature by default)."""
    torch.manual_seed(seed)
    critic = Critic(OBS_DIM, HIDDEN)
    optimizer = torch.optim.Adam(critic.parameters(), lr=1e-2)
    settings = {"replacement_rate": 0.25, "maturity_threshold": 0, "utility_decay": 0.99, **kwargs}
    return critic, optimizer, GenerateAndTest(critic.trunk, critic.head, optimizer, **settings)


def train_step(critic, optimizer, x):
    """One Adam step on a regression loss; returns the step's hidden activations (as the script passes them)."""
    activations = critic.hidden_activations(x)
    loss = (critic.head(activations[-1]).squeeze(-1) - 1.0).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return activations


def test_contribution_utility_matches_brute_force():
    activation = torch.rand(7, 4)
    weight = torch.randn(3, 4)
    brute = [np.mean(np.abs(activation[:, j].numpy())) * np.mean(np.abs(weight[:, j].numpy())) for j in range(4)]
    np.testing.assert_allclose(contribution_utility(activation, weight).numpy(), brute, rtol=1e-6)


def test_utility_is_the_bias_corrected_moving_average():
    critic, _, gnt = critic_with_generate_and_test(replacement_rate=0.0, utility_decay=0.9)
    contributions = []
    for _ in range(5):
        activations = critic.hidden_activations(torch.randn(16, OBS_DIM))
        contributions.append(contribution_utility(activations[1], critic.head.weight).detach())
        gnt.step(activations)
    # Closed form after T steps: sum_t (1 - d) d^(T-1-t) c_t / (1 - d^T)   (gnt.py: util, bias_correction)
    d, T = 0.9, 5
    expected = sum((1 - d) * d ** (T - 1 - t) * c for t, c in enumerate(contributions)) / (1 - d**T)
    torch.testing.assert_close(gnt.bias_corrected_utilities(1), expected)


@pytest.mark.parametrize("decay", [0.0, 1e-4])
def test_small_decay_makes_utility_the_latest_contribution(decay):
    # The paper's table lists decay rate 1e-4: the utility is then the last minibatch's contribution (docs/baselines.md).
    critic, _, gnt = critic_with_generate_and_test(replacement_rate=0.0, utility_decay=decay)
    contributions = []
    for _ in range(3):
        activations = critic.hidden_activations(torch.randn(16, OBS_DIM))
        gnt.step(activations)
        contributions.append(contribution_utility(activations[0], critic.trunk[3].weight).detach())
    # u = sum_t (1 - d) d^(T-1-t) c_t / (1 - d^T) differs from c_T by at most 2 d max_t c_t (+ float32 rounding)
    tolerance = (2 * decay + 1e-6) * float(torch.stack(contributions).max())
    assert torch.all((gnt.bias_corrected_utilities(0) - contributions[-1]).abs() <= tolerance)


def test_replaces_the_lowest_utility_units_with_fresh_inputs_zero_outputs_and_zero_moments():
    critic, optimizer, gnt = critic_with_generate_and_test(replacement_rate=0.25, maturity_threshold=2)
    x = torch.randn(32, OBS_DIM)
    for _ in range(2):  # ages 1 and 2: not yet older than the threshold
        assert gnt.step(train_step(critic, optimizer, x)) == 0
    activations = train_step(critic, optimizer, x)
    lowest = []
    for layer in range(2):  # the utilities this step will rank, computed independently
        utility = 0.99 * gnt.utilities[layer] + 0.01 * contribution_utility(activations[layer],
                                                                             gnt.linears[layer + 1].weight)
        lowest.append(sorted(torch.argsort(utility.detach() / (1 - 0.99**3), stable=True)[:2].tolist()))
    before = {name: p.detach().clone() for name, p in critic.named_parameters()}
    moments_before = {(id(p), k): v.clone() for p in critic.parameters() for k, v in optimizer.state[p].items()}

    assert gnt.step(activations) == 4  # 0.25 * 8 mature units, in each of the two hidden layers

    head_rows = list(range(critic.head.out_features))
    for layer, units in enumerate(lowest):
        kept = [j for j in range(HIDDEN) if j not in units]
        incoming, outgoing, norm = gnt.linears[layer], gnt.linears[layer + 1], gnt.layer_norms[layer]
        assert torch.nonzero(gnt.ages[layer] == 0).squeeze(1).tolist() == units
        assert torch.all(gnt.utilities[layer][units] == 0)
        # Rows of the next layer that were replaced themselves got a whole fresh row; all others read 0.
        rows = head_rows if layer == 1 else [r for r in range(HIDDEN) if r not in lowest[1]]
        assert torch.all(outgoing.weight[rows][:, units] == 0)
        assert torch.all(incoming.bias[units] == 0)
        assert torch.all(norm.weight[units] == 1) and torch.all(norm.bias[units] == 0)
        assert not torch.equal(incoming.weight[units], before[f"trunk.{3 * layer}.weight"][units])
        # kept rows are untouched, except for their inputs from replaced units of the layer below (zeroed)
        columns = list(range(incoming.in_features)) if layer == 0 else [j for j in range(HIDDEN) if j not in lowest[0]]
        assert torch.equal(incoming.weight[kept][:, columns], before[f"trunk.{3 * layer}.weight"][kept][:, columns])
        for parameter, entries in ((incoming.weight, units), (incoming.bias, units), (norm.weight, units),
                                   (norm.bias, units), (outgoing.weight, (slice(None), units))):
            for key in ("exp_avg", "exp_avg_sq"):
                assert torch.all(optimizer.state[parameter][key][entries] == 0)
        for key in ("exp_avg", "exp_avg_sq"):  # moments of the kept units' outgoing weights are untouched
            old = moments_before[(id(outgoing.weight), key)]
            assert torch.equal(optimizer.state[outgoing.weight][key][rows][:, kept], old[rows][:, kept])
    # The second layer (256 x 256 in the script, 8 x 8 here) is square: layer_init's orthogonal rows have norm
    # exactly the gain sqrt(2), and so must the fresh rows.
    fresh_norms = gnt.linears[1].weight[lowest[1]].norm(dim=1)
    torch.testing.assert_close(fresh_norms, torch.full_like(fresh_norms, math.sqrt(2)))


def test_without_optimizer_reset_the_moments_are_kept():
    critic, optimizer, gnt = critic_with_generate_and_test(replacement_rate=1.0, reset_optimizer_state=False)
    activations = train_step(critic, optimizer, torch.randn(16, OBS_DIM))
    moments = {(id(p), k): v.clone() for p in critic.parameters() for k, v in optimizer.state[p].items()}
    assert gnt.step(activations) == 2 * HIDDEN
    for p in critic.parameters():
        for k, v in optimizer.state[p].items():
            assert torch.equal(v, moments[(id(p), k)])


def test_no_mature_unit_leaves_the_network_unchanged():
    critic, optimizer, gnt = critic_with_generate_and_test(replacement_rate=1.0, maturity_threshold=20)
    x = torch.randn(16, OBS_DIM)
    outputs = critic(x).detach().clone()
    parameters = [p.detach().clone() for p in critic.parameters()]
    for _ in range(20):  # ages 1..20: none is older than 20
        assert gnt.step(critic.hidden_activations(x)) == 0
    assert torch.equal(critic(x), outputs)
    assert all(torch.equal(p, q) for p, q in zip(critic.parameters(), parameters))
    assert gnt.step(critic.hidden_activations(x)) == 2 * HIDDEN  # age 21: all mature, rate 1 replaces all


def test_fractional_replacements_accumulate_to_the_exact_rate():
    critic, _, gnt = critic_with_generate_and_test(replacement_rate=0.01, maturity_threshold=0)
    x = torch.randn(16, OBS_DIM)
    total = 0
    for step in range(1, 301):
        total += gnt.step(critic.hidden_activations(x))
        # 0.01 * 8 mature units per layer per step, whole units only, the fraction carried over
        assert total == 2 * math.floor(0.08 * step + 1e-9)
    assert total == 48


def test_state_dict_resumes_to_identical_networks():
    x = torch.randn(16, OBS_DIM)
    settings = {"replacement_rate": 0.2, "maturity_threshold": 1}
    critic, optimizer, gnt = critic_with_generate_and_test(**settings)
    for _ in range(4):
        gnt.step(train_step(critic, optimizer, x))
    # deep copies: the script serializes at once, while these live on and the optimizer mutates its state in place
    saved = copy.deepcopy((critic.state_dict(), optimizer.state_dict(), gnt.state_dict(), torch.get_rng_state()))
    for _ in range(6):
        gnt.step(train_step(critic, optimizer, x))

    resumed, resumed_optimizer, resumed_gnt = critic_with_generate_and_test(seed=1, **settings)
    resumed.load_state_dict(saved[0])
    resumed_optimizer.load_state_dict(saved[1])
    resumed_gnt.load_state_dict(saved[2])
    torch.set_rng_state(saved[3])  # the script checkpoints the RNG (fresh rows are random)
    for _ in range(6):
        resumed_gnt.step(train_step(resumed, resumed_optimizer, x))
    for (name, a), b in zip(critic.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert all(torch.equal(a, b) for a, b in zip(gnt.ages + gnt.utilities, resumed_gnt.ages + resumed_gnt.utilities))
    assert gnt.pending_replacements == resumed_gnt.pending_replacements


def test_actor_generate_and_test_covers_the_mean_network():
    torch.manual_seed(0)
    actor = Actor(OBS_DIM, ACTION_DIM, HIDDEN)
    optimizer = torch.optim.Adam(actor.parameters())
    gnt = GenerateAndTest(actor.trunk, actor.mean_head, optimizer, 1.0, 0, 0.99)
    assert gnt.linears[-1] is actor.mean_head and len(gnt.layer_norms) == 2
    gnt.step(actor.hidden_activations(torch.randn(4, OBS_DIM)))
    assert torch.all(actor.mean_head.weight == 0)  # every unit replaced: the mean no longer depends on the trunk


def test_extreme_activations_give_finite_utilities():
    critic, _, gnt = critic_with_generate_and_test(replacement_rate=0.5)
    huge = [torch.full((4, HIDDEN), 1e30), torch.zeros(4, HIDDEN)]
    for _ in range(3):
        gnt.step(huge)
    assert all(torch.isfinite(gnt.bias_corrected_utilities(i)).all() for i in range(2))
    assert math.isfinite(gnt.mean_utility())


def scalars(run_dir, tag):
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [event.value for event in events.Scalars(tag)]


@pytest.fixture(scope="module")
def replacing_run(tmp_path_factory):
    """A tiny run with a low maturity threshold, so that units really are replaced."""
    run_dir = tmp_path_factory.mktemp("cb") / "run"
    result = run_script("cb_continuous.py", run_dir, "--maturity-threshold", "2", "--replacement-rate", "0.05")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_tiny_run_writes_evaluations_and_replacement_logs(replacing_run):
    rows = [(int(r["global_step"]), int(r["task"])) for r in read_csv(replacing_run / "evaluations.csv")]
    assert rows == TINY_EVALUATION_STEPS
    # 3 updates x 2 epochs x 2 minibatches = 12 steps; from age 3 on, 0.05 * 256 = 12.8 units per layer per step
    replaced = scalars(replacing_run, "cb/replaced_units")
    assert len(replaced) == 3 and sum(replaced) > 0
    assert replaced == [a + c for a, c in zip(scalars(replacing_run, "cb/actor_replaced_units"),
                                              scalars(replacing_run, "cb/critic_replaced_units"))]
    assert all(math.isfinite(u) and u >= 0 for u in scalars(replacing_run, "cb/critic_mean_utility"))
    checkpoint = torch.load(replacing_run / "checkpoint.pt", weights_only=False)
    for network in ("actor", "critic"):
        state = checkpoint[f"{network}_generate_and_test"]
        ages = [state["ages.0"], state["ages.1"]]
        assert all(int(a.max()) <= 12 for a in ages) and any(int(a.min()) < 12 for a in ages)


@pytest.mark.parametrize("field, value", [("replacement_rate", 1.5), ("replacement_rate", float("nan")),
                                          ("maturity_threshold", -1), ("utility_decay", 1.0),
                                          ("weight_decay", -1e-4), ("weight_decay", float("inf"))])
def test_bad_cb_flags_are_rejected_naming_the_flag(field, value):
    # the script turns this ValueError into exit code 2 (tests/test_all_scripts.py checks that path)
    with pytest.raises(ValueError, match="--" + field.replace("_", "-")):
        cb.validate_args(dataclasses.replace(cb.Args(), **{field: value}))


def test_help_lists_the_cb_flags(tmp_path):
    result = run_script("cb_continuous.py", tmp_path, "--help", tiny=False, timeout=120)
    for flag in ("--replacement-rate", "--maturity-threshold", "--utility-decay", "--weight-decay",
                 "--reset-optimizer-state"):
        assert flag in result.stdout


def test_without_replacement_or_decay_cb_is_ppo(tmp_path):
    """replacement rate 0 and weight decay 0 leave only the utility bookkeeping: identical evaluations to PPO."""
    cb = run_script("cb_continuous.py", tmp_path / "cb", "--replacement-rate", "0", "--weight-decay", "0")
    ppo = run_script("ppo_continuous.py", tmp_path / "ppo")
    assert cb.returncode == 0 and ppo.returncode == 0, (cb.stderr[-2000:], ppo.stderr[-2000:])
    with open(tmp_path / "cb" / "evaluations.csv") as a, open(tmp_path / "ppo" / "evaluations.csv") as b:
        assert a.read() == b.read()
