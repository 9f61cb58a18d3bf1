"""Tests for cb_continuous.py: continual backpropagation's generate-and-test (Dohare et al., 2024), the script, and its
batch, losses and update against the independent reference of tests/reference_math.py."""

import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import cb_continuous as cb
import reference_math as ref
from cb_continuous import Actor, Critic, GenerateAndTest, SeedwiseAdam, contribution_utility
from tiny_run import TINY_EVALUATION_STEPS, load_checkpoint_file, read_csv, run_script

# The flags that make CB replace units inside the tiny runs: the shared end-to-end tests (SIGTERM + resume, seed
# independence, the golden outputs of two seeds) run this script with them (tiny_run.method_event_flags).
EVENT_FLAGS = ["--maturity-threshold", "2", "--replacement-rate", "0.05"]
OBS_DIM, ACTION_DIM, HIDDEN = 5, 2, 8


def critic_with_generate_and_test(seeds=(0,), hidden=HIDDEN, **kwargs):
    """A small stacked critic (one seed per entry of ``seeds``, each initialized from its own generator), its
    SeedwiseAdam and a generate-and-test over it (every unit mature by default)."""
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    critic = Critic(OBS_DIM, dataclasses.replace(cb.Args(), hidden_dim=hidden), generators)
    optimizer = SeedwiseAdam(critic.parameters(), lr=1e-2)
    settings = {"replacement_rate": 0.25, "maturity_threshold": 0, "utility_decay": 0.99, **kwargs}
    return critic, optimizer, GenerateAndTest(critic.trunk, critic.head, optimizer, generators, **settings)


def train_step(critic, optimizer, x):
    """One Adam step on a regression loss (per seed, summed over seeds as in the script); returns the step's
    hidden activations (as the script passes them). x: (seeds, batch, OBS_DIM)."""
    activations = critic.hidden_activations(x)
    loss = (critic.head(activations[-1]).squeeze(-1) - 1.0).pow(2).mean(-1).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return activations


def seed_state(critic, optimizer, gnt, k):
    """Everything of seed k: parameters, Adam moments and step counts, ages, utilities and pending fractions."""
    state = {f"param.{name}": p.detach()[k].clone() for name, p in critic.named_parameters()}
    for name, p in critic.named_parameters():
        for key, value in optimizer.state[p].items():
            state[f"adam.{name}.{key}"] = value[k].clone()
    for key, value in gnt.state_dict().items():
        state[f"gnt.{key}"] = value[k].clone()
    return state


def assert_equal_states(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_contribution_utility_matches_brute_force_per_seed():
    activation = torch.rand(2, 7, 4)  # (seeds, batch, units)
    weight = torch.randn(2, 3, 4)  # (seeds, next units, units)
    utility = contribution_utility(activation, weight)
    assert utility.shape == (2, 4)
    for k in range(2):  # each seed's utility reduces over its own samples and outgoing weights only
        brute = [np.mean(np.abs(activation[k, :, j].numpy())) * np.mean(np.abs(weight[k, :, j].numpy()))
                 for j in range(4)]
        np.testing.assert_allclose(utility[k].numpy(), brute, rtol=1e-6)


def test_utility_is_the_bias_corrected_moving_average():
    critic, _, gnt = critic_with_generate_and_test(seeds=(0, 1), replacement_rate=0.0, utility_decay=0.9)
    contributions = []
    for _ in range(5):
        activations = critic.hidden_activations(torch.randn(2, 16, OBS_DIM))
        contributions.append(contribution_utility(activations[1], critic.head.weight).detach())
        gnt.step(activations)
    # Closed form after T steps: sum_t (1 - d) d^(T-1-t) c_t / (1 - d^T)   (gnt.py: util, bias_correction)
    d, T = 0.9, 5
    expected = sum((1 - d) * d ** (T - 1 - t) * c for t, c in enumerate(contributions)) / (1 - d**T)
    for k in range(2):
        torch.testing.assert_close(gnt.bias_corrected_utilities(1, k), expected[k])


@pytest.mark.parametrize("decay", [0.0, 1e-4])
def test_small_decay_makes_utility_the_latest_contribution(decay):
    # The paper's table lists decay rate 1e-4: the utility is then the last minibatch's contribution
    # (docs/baselines.md).
    critic, _, gnt = critic_with_generate_and_test(replacement_rate=0.0, utility_decay=decay)
    contributions = []
    for _ in range(3):
        activations = critic.hidden_activations(torch.randn(1, 16, OBS_DIM))
        gnt.step(activations)
        contributions.append(contribution_utility(activations[0], critic.trunk[3].weight).detach()[0])
    # u = sum_t (1 - d) d^(T-1-t) c_t / (1 - d^T) differs from c_T by at most 2 d max_t c_t (+ float32 rounding)
    tolerance = (2 * decay + 1e-6) * float(torch.stack(contributions).max())
    assert torch.all((gnt.bias_corrected_utilities(0, 0) - contributions[-1]).abs() <= tolerance)


def test_replaces_the_lowest_utility_units_with_fresh_inputs_zero_outputs_and_zero_moments():
    critic, optimizer, gnt = critic_with_generate_and_test(replacement_rate=0.25, maturity_threshold=2)
    x = torch.randn(1, 32, OBS_DIM)
    for _ in range(2):  # ages 1 and 2: not yet older than the threshold
        assert gnt.step(train_step(critic, optimizer, x)).tolist() == [0]
    activations = train_step(critic, optimizer, x)
    lowest = []
    for layer in range(2):  # the utilities this step will rank, computed independently
        utility = 0.99 * gnt.utilities[layer][0] + 0.01 * contribution_utility(activations[layer],
                                                                                gnt.linears[layer + 1].weight)[0]
        lowest.append(sorted(torch.argsort(utility.detach() / (1 - 0.99**3), stable=True)[:2].tolist()))
    before = {name: p.detach()[0].clone() for name, p in critic.named_parameters()}
    moments_before = {(id(p), k): v[0].clone() for p in critic.parameters() for k, v in optimizer.state[p].items()}
    steps_before = [optimizer.state[p]["step"].clone() for p in critic.parameters()]

    assert gnt.step(activations).tolist() == [4]  # 0.25 * 8 mature units, in each of the two hidden layers

    head_rows = list(range(critic.head.weight.shape[1]))
    for layer, units in enumerate(lowest):
        kept = [j for j in range(HIDDEN) if j not in units]
        incoming, outgoing, norm = gnt.linears[layer], gnt.linears[layer + 1], gnt.layer_norms[layer]
        w_in, w_out = incoming.weight[0], outgoing.weight[0]
        assert torch.nonzero(gnt.ages[layer][0] == 0).squeeze(1).tolist() == units
        assert torch.all(gnt.utilities[layer][0, units] == 0)
        # Rows of the next layer that were replaced themselves got a whole fresh row; all others read 0.
        rows = head_rows if layer == 1 else [r for r in range(HIDDEN) if r not in lowest[1]]
        assert torch.all(w_out[rows][:, units] == 0)
        assert torch.all(incoming.bias[0, 0, units] == 0)
        assert torch.all(norm.weight[0, 0, units] == 1) and torch.all(norm.bias[0, 0, units] == 0)
        assert not torch.equal(w_in[units], before[f"trunk.{3 * layer}.weight"][units])
        # kept rows are untouched, except for their inputs from replaced units of the layer below (zeroed)
        columns = list(range(w_in.shape[1])) if layer == 0 else [j for j in range(HIDDEN) if j not in lowest[0]]
        assert torch.equal(w_in[kept][:, columns], before[f"trunk.{3 * layer}.weight"][kept][:, columns])
        for parameter, entries in ((incoming.weight, units), (incoming.bias, (0, units)), (norm.weight, (0, units)),
                                   (norm.bias, (0, units)), (outgoing.weight, (slice(None), units))):
            for key in ("exp_avg", "exp_avg_sq"):
                assert torch.all(optimizer.state[parameter][key][0][entries] == 0)
        for key in ("exp_avg", "exp_avg_sq"):  # moments of the kept units' outgoing weights are untouched
            old = moments_before[(id(outgoing.weight), key)]
            assert torch.equal(optimizer.state[outgoing.weight][key][0][rows][:, kept], old[rows][:, kept])
    # Adam's step counts are not reset (as torch.optim.Adam's were in the one-seed script)
    assert all(torch.equal(optimizer.state[p]["step"], s) for p, s in zip(critic.parameters(), steps_before))
    # The second layer (256 x 256 in the script, 8 x 8 here) is square: layer_init's orthogonal rows have norm
    # exactly the gain sqrt(2), and so must the fresh rows.
    fresh_norms = gnt.linears[1].weight[0, lowest[1]].norm(dim=1)
    torch.testing.assert_close(fresh_norms, torch.full_like(fresh_norms, math.sqrt(2)))


def test_a_replacement_in_one_seed_leaves_the_other_seed_untouched():
    """Seed 0 steps and replaces units; seed 1 skipped its step (non-finite): its weights, Adam moments, ages,
    utilities, pending fractions and random stream are exactly as before."""
    critic, optimizer, gnt = critic_with_generate_and_test(seeds=(0, 1), replacement_rate=0.25, maturity_threshold=1)
    x = torch.randn(2, 32, OBS_DIM)
    gnt.step(train_step(critic, optimizer, x))  # age 1: none mature
    activations = train_step(critic, optimizer, x)
    before = [seed_state(critic, optimizer, gnt, k) for k in range(2)]
    generator_before = gnt.generators[1].get_state()

    assert gnt.step(activations, np.array([True, False])).tolist() == [4, 0]

    assert_equal_states(seed_state(critic, optimizer, gnt, 1), before[1])
    assert torch.equal(gnt.generators[1].get_state(), generator_before)
    after = seed_state(critic, optimizer, gnt, 0)
    assert not torch.equal(after["param.trunk.0.weight"], before[0]["param.trunk.0.weight"])
    assert int((after["gnt.ages.0"] == 0).sum()) == 2 and int((after["gnt.ages.1"] == 0).sum()) == 2
    assert not torch.equal(after["adam.head.weight.exp_avg"], before[0]["adam.head.weight.exp_avg"])


def test_a_seed_replaces_exactly_as_it_does_alone():
    """Seed 1 beside seed 0 (at position 1 of the stack) ends bit-identical to seed 1 alone, replacements, fresh
    rows from its own generator and Adam moments included; an odd width puts its entries at unaligned offsets."""
    hidden, steps = 13, 6
    settings = {"hidden": hidden, "replacement_rate": 0.2, "maturity_threshold": 1}
    pair = critic_with_generate_and_test(seeds=(0, 1), **settings)
    alone = critic_with_generate_and_test(seeds=(1,), **settings)
    data = torch.randn(steps, 2, 32, OBS_DIM)
    replaced_pair, replaced_alone = 0, 0
    for x in data:
        critic, optimizer, gnt = pair
        replaced_pair += gnt.step(train_step(critic, optimizer, x))[1]
        critic, optimizer, gnt = alone
        replaced_alone += gnt.step(train_step(critic, optimizer, x[1:]))[0]
    assert replaced_pair == replaced_alone > 0
    assert_equal_states(seed_state(*pair, 1), seed_state(*alone, 0))
    assert torch.equal(pair[2].generators[1].get_state(), alone[2].generators[0].get_state())


def test_without_optimizer_reset_the_moments_are_kept():
    critic, optimizer, gnt = critic_with_generate_and_test(seeds=(0, 1), replacement_rate=1.0,
                                                           reset_optimizer_state=False)
    activations = train_step(critic, optimizer, torch.randn(2, 16, OBS_DIM))
    moments = {(id(p), k): v.clone() for p in critic.parameters() for k, v in optimizer.state[p].items()}
    assert gnt.step(activations).tolist() == [2 * HIDDEN] * 2
    for p in critic.parameters():
        for k, v in optimizer.state[p].items():
            assert torch.equal(v, moments[(id(p), k)])


def test_no_mature_unit_leaves_the_network_unchanged():
    critic, optimizer, gnt = critic_with_generate_and_test(seeds=(0, 1), replacement_rate=1.0, maturity_threshold=20)
    x = torch.randn(2, 16, OBS_DIM)
    outputs = critic(x).detach().clone()
    parameters = [p.detach().clone() for p in critic.parameters()]
    for _ in range(20):  # ages 1..20: none is older than 20
        assert gnt.step(critic.hidden_activations(x)).tolist() == [0, 0]
    assert torch.equal(critic(x), outputs)
    assert all(torch.equal(p, q) for p, q in zip(critic.parameters(), parameters))
    # age 21: all mature, rate 1 replaces all, in every seed
    assert gnt.step(critic.hidden_activations(x)).tolist() == [2 * HIDDEN] * 2


def test_fractional_replacements_accumulate_to_the_exact_rate():
    critic, _, gnt = critic_with_generate_and_test(seeds=(0, 1), replacement_rate=0.01, maturity_threshold=0)
    x = torch.randn(2, 16, OBS_DIM)
    total = np.zeros(2, np.int64)
    for step in range(1, 301):
        # seed 1 skips every third step: its fractions accumulate over its own steps only
        stepping = np.array([True, step % 3 != 0])
        total += gnt.step(critic.hidden_activations(x), stepping)
        # 0.01 * 8 mature units per layer per step, whole units only, the fraction carried over
        own_steps = [step, step - step // 3]
        assert total.tolist() == [2 * math.floor(0.08 * s + 1e-9) for s in own_steps]
    assert total.tolist() == [48, 2 * math.floor(0.08 * 200 + 1e-9)]


def test_state_dict_resumes_to_identical_networks():
    """The state splits by seed and restacks (as the script's checkpoints do) and resumes bit-identically."""
    x = torch.randn(2, 16, OBS_DIM)
    settings = {"replacement_rate": 0.2, "maturity_threshold": 1}
    critic, optimizer, gnt = critic_with_generate_and_test(seeds=(0, 1), **settings)
    for _ in range(4):
        gnt.step(train_step(critic, optimizer, x))
    # deep copies: the script serializes at once, while these live on and the optimizer mutates its state in place
    saved = copy.deepcopy((critic.state_dict(), optimizer.state_dict(), gnt.state_dict(),
                           [generator.get_state() for generator in gnt.generators]))
    for _ in range(6):
        gnt.step(train_step(critic, optimizer, x))

    resumed, resumed_optimizer, resumed_gnt = critic_with_generate_and_test(seeds=(5, 6), **settings)
    restacked = cb.stack_seeds([cb.seed_slice(saved[2], k) for k in range(2)])
    assert all(restacked[key].shape[0] == 2 for key in restacked)
    resumed.load_state_dict(saved[0])
    resumed_optimizer.load_state_dict(saved[1])
    resumed_gnt.load_state_dict(restacked)
    for generator, state in zip(resumed_gnt.generators, saved[3]):
        generator.set_state(state)  # the script checkpoints each seed's generator (fresh rows are random)
    for _ in range(6):
        resumed_gnt.step(train_step(resumed, resumed_optimizer, x))
    for (name, a), b in zip(critic.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    for (key, a), b in zip(gnt.state_dict().items(), resumed_gnt.state_dict().values()):
        assert torch.equal(a, b), key


def test_seedwise_adam_weight_decay_is_torch_adams_per_seed():
    """CB's L2 regularization: each seed's step equals torch.optim.Adam(weight_decay=...) on that seed alone."""
    torch.manual_seed(0)
    stacked = torch.nn.Parameter(torch.randn(3, 4, 5))
    optimizer = SeedwiseAdam([stacked], lr=1e-2, eps=1e-5, weight_decay=0.1)
    singles = [torch.nn.Parameter(stacked.detach()[k].clone()) for k in range(3)]
    single_optimizers = [torch.optim.Adam([p], lr=1e-2, eps=1e-5, weight_decay=0.1, fused=True) for p in singles]
    for _ in range(3):
        gradient = torch.randn(3, 4, 5)
        optimizer.zero_grad()
        stacked.grad = gradient.clone()
        optimizer.step()
        for k, (p, single_optimizer) in enumerate(zip(singles, single_optimizers)):
            p.grad = gradient[k].clone()
            single_optimizer.step()
    for k, p in enumerate(singles):
        assert torch.equal(stacked.detach()[k], p.detach())
    without_decay = torch.nn.Parameter(torch.ones(1, 2))
    plain = SeedwiseAdam([without_decay], lr=1e-2)
    plain.step()  # zero gradient, no decay: nothing moves
    assert torch.equal(without_decay.detach(), torch.ones(1, 2))


def test_actor_generate_and_test_covers_the_mean_network():
    generators = [torch.Generator().manual_seed(seed) for seed in (0, 1)]
    actor = Actor(OBS_DIM, ACTION_DIM, dataclasses.replace(cb.Args(), hidden_dim=HIDDEN), generators)
    optimizer = SeedwiseAdam(actor.parameters(), lr=1e-3)
    gnt = GenerateAndTest(actor.trunk, actor.mean_head, optimizer, generators, 1.0, 0, 0.99)
    assert gnt.linears[-1] is actor.mean_head and len(gnt.layer_norms) == 2
    gnt.step(actor.hidden_activations(torch.randn(2, 4, OBS_DIM)))
    assert torch.all(actor.mean_head.weight == 0)  # every unit replaced: the mean no longer depends on the trunk


def test_extreme_activations_give_finite_utilities():
    critic, _, gnt = critic_with_generate_and_test(replacement_rate=0.5)
    huge = [torch.full((1, 4, HIDDEN), 1e30), torch.zeros(1, 4, HIDDEN)]
    for _ in range(3):
        gnt.step(huge)
    assert all(torch.isfinite(gnt.bias_corrected_utilities(i, 0)).all() for i in range(2))
    assert all(math.isfinite(u) for u in cb.mean_utility(gnt))


def scalars(run_dir, tag):
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [event.value for event in events.Scalars(tag)]


@pytest.fixture(scope="module")
def replacing_run(tmp_path_factory):
    """A tiny two-seed run with a low maturity threshold, so that units really are replaced."""
    run_dir = tmp_path_factory.mktemp("cb") / "run"
    result = run_script("cb_continuous.py", run_dir / "seed{seed}", "--num-seeds", "2", "--maturity-threshold", "2",
                        "--replacement-rate", "0.05")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.mark.parametrize("seed", [1, 2])
def test_tiny_run_writes_evaluations_and_replacement_logs(replacing_run, seed):
    seed_dir = replacing_run / f"seed{seed}"
    rows = [(int(r["global_step"]), int(r["task"])) for r in read_csv(seed_dir / "evaluations.csv")]
    assert rows == TINY_EVALUATION_STEPS
    # 3 updates x 2 epochs x 2 minibatches = 12 steps; from age 3 on, 0.05 * 256 = 12.8 units per layer per step
    replaced = scalars(seed_dir, "cb/replaced_units")
    assert len(replaced) == 3 and sum(replaced) > 0
    assert replaced == [a + c for a, c in zip(scalars(seed_dir, "cb/actor_replaced_units"),
                                              scalars(seed_dir, "cb/critic_replaced_units"))]
    assert all(math.isfinite(u) and u >= 0 for u in scalars(seed_dir, "cb/critic_mean_utility"))
    checkpoint = load_checkpoint_file(seed_dir / "checkpoint.pt")
    for network in ("actor", "critic"):
        state = checkpoint[f"{network}_generate_and_test"]
        ages = [state["ages.0"], state["ages.1"]]
        assert all(a.shape == (1, 256) for a in ages)  # this seed's own slice, as a one-seed run writes it
        assert all(int(a.max()) <= 12 for a in ages) and any(int(a.min()) < 12 for a in ages)
        assert state["pending_replacements"].shape == (1, 2)


@pytest.mark.parametrize("field, value", [("replacement_rate", 1.5), ("replacement_rate", float("nan")),
                                          ("maturity_threshold", -1), ("utility_decay", 1.0),
                                          ("weight_decay", -1e-4), ("weight_decay", float("inf"))])
def test_bad_cb_flags_are_rejected_naming_the_flag(field, value):
    # the script turns this ValueError into exit code 2 (tests/plumbing/test_all_scripts.py checks that path)
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


# Appendix B, "CB details", as its text states them (written out here, apart from the script's table): slippery,
# maturity 1000 with replacement rates 1e-4 (Ant) and 1e-5 (HalfCheetah); paralysis, 1000 and 1e-4 on Ant, 10000 and
# 1e-5 on HalfCheetah. A setting the paper did not search (the stationary runs) keeps the Ant values.
@pytest.mark.parametrize("experiment, env_id, maturity_threshold, replacement_rate", [
    ("slippery", "Ant-v5", 1000, 1e-4), ("slippery", "HalfCheetah-v5", 1000, 1e-5),
    ("paralysis", "Ant-v5", 1000, 1e-4), ("paralysis", "HalfCheetah-v5", 10000, 1e-5),
    ("none", "HalfCheetah-v5", 1000, 1e-4)])
def test_without_the_flags_cb_takes_the_papers_values_for_the_setting(experiment, env_id, maturity_threshold,
                                                                      replacement_rate):
    args = cb.Args(env_id=env_id, experiment=experiment)
    assert (args.maturity_threshold, args.replacement_rate) == (maturity_threshold, replacement_rate)
    assert "Appendix B" in cb.cb_note(args) if experiment != "none" else "searched none" in cb.cb_note(args)
    # a flag given wins over the setting's value, and the note names it
    args = cb.Args(env_id=env_id, experiment=experiment, maturity_threshold=7, replacement_rate=0.5)
    assert (args.maturity_threshold, args.replacement_rate) == (7, 0.5)
    assert cb.cb_note(args) == "maturity threshold 7 (--maturity-threshold), replacement rate 0.5 (--replacement-rate)"


# Enough minibatch steps (4 rollouts x 32 epochs x 16 minibatches = 2,048) that units pass a maturity of 1,000 and
# 1e-4 of them are replaced (about 25 per layer), while with 10,000 none is: the values change what the run computes.
MATURING_FLAGS = ("--minibatch-size", "8", "--update-epochs", "32")
BEFORE_PER_SETTING_FLAGS = ("--maturity-threshold", "1000", "--replacement-rate", "1e-4")


def test_the_values_before_per_setting_defaults_are_one_set_of_flags_away(tmp_path):
    """Before CB took its values per setting, every run had the Ant values (1000, 1e-4). On HalfCheetah paralysis
    those values, given as flags, reproduce that code's run bit for bit (golden_outputs.REFERENCE_COMMIT's script,
    whose CB predates the change), and the new default (10000, 1e-5) does not."""
    import golden_outputs
    from tiny_run import cannot_run

    if not golden_outputs.reference_available():
        cannot_run(f"the reference commit {golden_outputs.REFERENCE_COMMIT[:10]} is not in this clone's history")
    golden_outputs.export_reference(tmp_path / "before")
    runs = {"before": run_script("cb_continuous.py", tmp_path / "run_before", *MATURING_FLAGS,
                                 repo_root=tmp_path / "before"),
            "flags": run_script("cb_continuous.py", tmp_path / "run_flags", *MATURING_FLAGS, *BEFORE_PER_SETTING_FLAGS),
            "default": run_script("cb_continuous.py", tmp_path / "run_default", *MATURING_FLAGS)}
    for name, result in runs.items():
        assert result.returncode == 0, (name, result.stderr[-3000:])
    before = {"1": golden_outputs.fingerprint(tmp_path / "run_before")}
    assert golden_outputs.differences({"1": golden_outputs.fingerprint(tmp_path / "run_flags")}, before) == []
    assert golden_outputs.differences({"1": golden_outputs.fingerprint(tmp_path / "run_default")}, before) != []
    assert "maturity threshold 10000 (the paper's for paralysis/HalfCheetah, Appendix B)" in runs["default"].stdout
    replaced = {name: sum(scalars(tmp_path / f"run_{name}", "cb/replaced_units")) for name in ("flags", "default")}
    assert replaced["flags"] > 0 and replaced["default"] == 0, replaced


# ---- Against the independent reference (tests/reference_math.py): the template's terms as CB assembles them, then
# one whole update with CB's L2 term inside Adam and the contribution utilities of the minibatch's pre-step
# activations ----


def test_template_advantages_and_losses_equal_the_reference():
    """The template's advantages, returns and losses as cb_continuous.py's compute_advantages and ppo_loss assemble
    them (reference_math.assert_template_advantages_and_losses), and the hidden outputs CB hands to generate-and-test:
    those of this minibatch."""
    run, rollout, index, activations = ref.assert_template_advantages_and_losses(cb)
    (actor_activations, critic_activations), = activations
    for k in range(2):
        obs = rollout.obs[k, index[k]].double().numpy()
        for network, got in ((run.agent.actor, actor_activations), (run.agent.critic, critic_activations)):
            for layer, expected in zip(got, ref.np_network(network, k, obs)["hidden"], strict=True):
                ref.close(layer[k], expected)


def test_cb_update_takes_l2_inside_adam_and_scores_units_by_the_minibatchs_contributions():
    """Weight decay 0.5 (so that the L2 term decides the step's sign on many entries), no replacement: every
    parameter ends at Adam's first step on gradient + 0.5 theta, and each hidden unit's utility is the contribution
    of this minibatch: mean |h_j| over its samples (pre-step activations) x mean |W_out[:, j]| (the stepped weights)."""
    weight_decay, decay = 0.5, 0.9
    run, before, generator_states, pre_step, _ = ref.one_update(cb, weight_decay=weight_decay, utility_decay=decay,
                                                                replacement_rate=0.0)
    for name in ("actor", "critic"):
        network = getattr(run.agent, name)
        stepped, _ = ref.reference_first_adam_step(network, before[name], run.args.learning_rate, weight_decay)
        without_decay, _ = ref.reference_first_adam_step(network, before[name], run.args.learning_rate)
        flipped = sum(int((np.sign(stepped[p] - before[name][p]) != np.sign(without_decay[p] - before[name][p])).sum())
                      for p in stepped)
        assert flipped > 10  # the L2 term changes the step, so the check below sees it
        for p, value in ref.parameters(network).items():
            ref.close(value, stepped[p], rtol=1e-6, atol=1e-7)
        gnt = getattr(run.agent, f"{name}_generate_and_test")
        for k in range(2):
            obs, _ = ref.minibatch_obs(run, generator_states, k)
            hidden = ref.np_network(getattr(pre_step, name), k, obs)["hidden"]
            outgoing = [layer for layer in network.trunk if type(layer).__name__ == "StackedLinear"][1:]
            outgoing.append(network.mean_head if name == "actor" else network.head)
            for layer, (activation, out_layer) in enumerate(zip(hidden, outgoing, strict=True)):
                contribution = np.abs(activation).mean(0) * np.abs(ref.weights(out_layer, k, "weight")).mean(0)
                assert gnt.ages[layer][k].tolist() == [1] * ref.HIDDEN
                # after one step the bias-corrected average is the step's contribution itself
                ref.close(gnt.utilities[layer][k], (1 - decay) * contribution, rtol=1e-5, atol=1e-8)
                ref.close(gnt.bias_corrected_utilities(layer, k), contribution, rtol=1e-5, atol=1e-8)
