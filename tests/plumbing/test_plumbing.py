"""The plumbing's units, tested on the template's copy (ppo_continuous.py below the marker line
'# ==== The plumbing', byte-identical in every script): the stacked layers and their initialization, SeedwiseAdam,
RunningMeanStd, seed_slice / stack_seeds, the network input, the evaluation schedule, the progress notes, Run's
fields, the helpers for plasticity methods (hidden_layers, fresh_draw,
steps_taken), initial_parameters and the rule for reductions over stacked parameters, the refusals of
--num-seeds, and check_flags (the table of flag rules that validate_args and validate_method check).

The plumbing end to end, in every script: tests/plumbing/test_all_scripts.py; a run directory's faults:
test_run_dir_faults.py and test_full_disk.py; --track: test_tracking.py.
"""

import math
import os

import numpy as np
import pytest
import torch

import ppo_continuous as ppo


def generators(*seeds):
    return [torch.Generator().manual_seed(seed) for seed in seeds]


def network_args(**flags) -> "ppo.Args":
    """The scripts' Args with small networks (hidden_dim 16) and the given network and policy flags."""
    return ppo.Args(**{"hidden_dim": 16, **flags})


def test_evaluation_schedule_of_the_paper():
    steps = ppo.evaluation_steps(500_000, 9, 20_000)
    assert steps[:3] == [0, 20_000, 40_000] and steps[-1] == 4_500_000
    assert len(steps) == 1 + 4_500_000 // 20_000  # 500k is a multiple of 20k: task ends coincide with them
    assert ppo.evaluation_steps(300, 2, 200) == [0, 200, 300, 400, 600]
    assert [ppo.evaluated_task(s, 300) for s in (0, 200, 300, 301, 600)] == [0, 0, 0, 1, 1]


def test_a_schedule_with_fewer_than_3_evaluations_per_task_says_so_at_the_start(capsys):
    """fewest_evaluations_per_task counts each task's evaluations after its first step (brute force over the
    schedule's steps); the header names --eval-frequency in one line below 3, with a frequency that gives 10."""
    for steps_per_task, num_tasks, every in ((500_000, 9, 20_000), (5_000, 9, 20_000), (300, 2, 200), (700, 3, 300)):
        points = ppo.evaluation_steps(steps_per_task, num_tasks, every)
        per_task = [len([s for s in points if s > 0 and (s - 1) // steps_per_task == task])
                    for task in range(num_tasks)]
        assert ppo.fewest_evaluations_per_task(steps_per_task, num_tasks, every) == min(per_task)
    assert ppo.fewest_evaluations_per_task(500_000, 9, 20_000) == 25
    assert ppo.fewest_evaluations_per_task(5_000, 9, 20_000) == 1
    notes = []
    for every in (20_000, 2_500, 1_000):
        args = ppo.Args(steps_per_task=5_000, num_tasks=2, eval_frequency=every, eval_episodes=1)
        run = ppo.Run()
        run.args, run.seeds, run.device, run.num_tasks, run.run_dirs = args, [1], torch.device("cpu"), 2, {1: "d"}
        run.env = run.eval_env = ppo.make_env(args, 1)
        ppo.print_header(run, (), resumed=False)
        notes.append([line for line in capsys.readouterr().out.splitlines() if "--eval-frequency" in line])
    assert [len(lines) for lines in notes] == [1, 1, 0]
    assert "evaluates 1 time(s)" in notes[0][0] and "evaluates 2 time(s)" in notes[1][0]
    suggested = int(notes[0][0].split("--eval-frequency ")[-1].split()[0])
    assert ppo.fewest_evaluations_per_task(5_000, 2, suggested) == 10


def test_running_mean_std_matches_numpy_over_a_stream_per_seed():
    rng = np.random.default_rng(1)
    data = rng.normal(3.0, 2.0, size=(2, 500, 4)) * np.array([1.0, 5.0])[:, None, None]  # two seeds' streams
    rms = ppo.RunningMeanStd(2, (4,), epsilon=1e-12)
    for start in range(0, 300):  # single rows (the per-step fast path) ...
        rms.update(data[:, start : start + 1])
    for start in range(300, 500, 50):  # ... then batches
        rms.update(data[:, start : start + 50])
    np.testing.assert_allclose(rms.mean[:, 0], data.mean(1), rtol=1e-9)
    np.testing.assert_allclose(rms.var[:, 0], data.var(1), rtol=1e-9)
    clipped = rms.normalize(np.full((2, 1, 4), 1e6), 10.0)
    assert clipped.dtype == np.float32 and np.all(clipped == 10.0)


def test_stacked_layers_equal_one_torch_layer_per_seed():
    """Seed k's slice of a StackedLinear / StackedLayerNorm computes exactly nn.Linear / nn.LayerNorm with that
    slice's parameters, and its initialization is CleanRL's orthogonal one drawn from seed k's generator alone."""
    layer = ppo.layer_init(ppo.StackedLinear(3, 5, 7), generators(4, 5, 6), std=1.3)
    norm = ppo.StackedLayerNorm(3, 7)
    with torch.no_grad():
        norm.weight.normal_(), norm.bias.normal_()
    x = torch.randn(3, 5, 5)  # 5 samples of 5 features: seed slices start at misaligned offsets
    y, z = layer(x), norm(layer(x))
    for k, seed in enumerate((4, 5, 6)):
        reference = torch.nn.Linear(5, 7)
        torch.nn.init.orthogonal_(reference.weight, 1.3, generator=torch.Generator().manual_seed(seed))
        torch.nn.init.zeros_(reference.bias)
        assert torch.equal(layer.weight[k], reference.weight.data)
        assert torch.equal(layer.bias[k, 0], reference.bias.data)
        assert torch.equal(y[k], reference(x[k].clone()))
        reference_norm = torch.nn.LayerNorm(7)
        reference_norm.weight.data, reference_norm.bias.data = norm.weight[k, 0].detach(), norm.bias[k, 0].detach()
        torch.testing.assert_close(z[k], reference_norm(y[k]), rtol=0, atol=1e-6)
        gram = layer.weight[k].T @ layer.weight[k]  # orthonormal columns (7 x 5 weight), scaled by the gain
        torch.testing.assert_close(gram.detach(), 1.3**2 * torch.eye(5), atol=1e-5, rtol=0)


def test_seedwise_adam_equals_torch_adam_per_seed_and_skips_exactly():
    """Each seed's slice follows optim.Adam(fused=True) on that slice alone, bit for bit, including a 6-entry
    parameter (fused Adam's scalar tail); a skipped seed keeps its parameters, moments and step count; per-seed
    clipping equals clip_grad_norm_ on each seed's parameters."""
    torch.manual_seed(0)
    stacked = [torch.nn.Parameter(torch.randn(3, 1, 6)), torch.nn.Parameter(torch.randn(3, 16, 5))]
    optimizer = ppo.SeedwiseAdam(stacked, lr=1e-2, eps=1e-5)
    singles = [[torch.nn.Parameter(p.data[k : k + 1].clone()) for p in stacked] for k in range(3)]
    references = [torch.optim.Adam(params, lr=1e-2, eps=1e-5, fused=True) for params in singles]
    for step in range(4):
        grads = [torch.randn_like(p) * 10 for p in stacked]
        stepping = np.array([True, step != 1, True])  # seed 1 skips its second step
        optimizer.zero_grad()
        for p, g in zip(stacked, grads):
            p.grad = g.clone()
        norms = optimizer.clip_grad_norms_(0.5)
        for k in range(3):
            for p, g in zip(singles[k], grads):
                p.grad = g[k : k + 1].clone()
            reference_norm = torch.nn.utils.clip_grad_norm_(singles[k], 0.5)
            assert torch.equal(norms[k], reference_norm)
            if stepping[k]:
                references[k].step()
        optimizer.step(None if stepping.all() else stepping)
        for k in range(3):
            for p, single in zip(stacked, singles[k]):
                assert torch.equal(p.data[k : k + 1], single.data)
    assert optimizer.state[stacked[0]]["step"].tolist() == [4.0, 3.0, 4.0]


def test_seed_slice_and_stack_seeds_are_inverse():
    state = {"actor": {"w": torch.randn(3, 2, 2)}, "rms": {"mean": np.arange(6.0).reshape(3, 1, 2), "count": 7.0},
             "step": torch.tensor(5.0), "list": [np.zeros((3, 4))], "iteration": 2}
    slices = [ppo.seed_slice(state, k) for k in range(3)]
    assert slices[1]["actor"]["w"].shape == (1, 2, 2) and slices[1]["rms"]["count"] == 7.0
    restored = ppo.stack_seeds(slices)
    assert torch.equal(restored["actor"]["w"], state["actor"]["w"]) and torch.equal(restored["step"], state["step"])
    assert np.array_equal(restored["rms"]["mean"], state["rms"]["mean"]) and restored["iteration"] == 2


def test_importing_the_script_has_no_side_effects(tmp_path, monkeypatch):
    import importlib
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ppo_continuous.py", "--help"])
    importlib.reload(ppo)  # would parse --help and exit if the script ran on import
    assert list(tmp_path.iterdir()) == []


def test_seedwise_adam_leaves_a_parameter_without_gradient_alone():
    """As torch.optim.Adam: a parameter that got no gradient is neither clipped nor stepped, nor counted."""
    used, unused = torch.nn.Parameter(torch.randn(2, 3)), torch.nn.Parameter(torch.randn(2, 3))
    optimizer = ppo.SeedwiseAdam([used, unused], lr=0.1)
    before = unused.detach().clone()
    used.square().sum().backward()
    optimizer.clip_grad_norms_(0.5)
    optimizer.step()
    assert torch.equal(unused.detach(), before) and optimizer.state[unused]["step"].tolist() == [0.0, 0.0]
    assert optimizer.state[used]["step"].tolist() == [1.0, 1.0] and not torch.equal(used.detach()[0], before[0])


def test_progress_note_gives_steps_percentage_rate_and_time_left(monkeypatch):
    monkeypatch.setattr(ppo.time, "perf_counter", lambda: 100.0)
    progress = ppo.Progress(4_500_000, 0)
    progress.bar.close()
    assert progress.note(0) == "0/4,500,000 steps (0.0%)"  # no rate before the first steps
    # 20,000 steps in 10 s since the last note: 2,000 steps/s, 4,480,000 steps left = 2,240 s = 0:37:20
    monkeypatch.setattr(ppo.time, "perf_counter", lambda: 110.0)
    assert progress.note(20_000) == "20,000/4,500,000 steps (0.4%), 2,000 steps/s, 0:37:20 left"
    assert progress.mark == (110.0, 20_000)  # the next rate is measured from here


def test_log_lines_say_where_the_run_is_when_output_goes_to_a_file(tmp_path):
    """stdout and stderr are pipes here, as under nohup, sweep.sh and SLURM: tqdm's bar is off, and every
    evaluation line carries the progress (the tiny run evaluates at 0, 128, 256, 384 and 512 of 512 steps)."""
    from tiny_run import run_script

    result = run_script("ppo_continuous.py", tmp_path / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    notes = [line.split(" | ")[1] for line in result.stdout.splitlines() if line.startswith("eval step=")]
    assert [note.split(" steps")[0] for note in notes] == [f"{s}/512" for s in (0, 128, 256, 384, 512)]
    assert [note.split("(")[1].split(")")[0] for note in notes] == ["0.0%", "25.0%", "50.0%", "75.0%", "100.0%"]
    assert all(note.endswith(" left") and " steps/s, " in note for note in notes[1:])


def test_the_logged_max_abs_gradient_is_plasticity_metrics_per_seed():
    """plasticity/critic_max_abs_grad comes from SeedwiseAdam.max_abs_gradients: for every seed it equals
    plasticity_metrics.max_abs_gradient of that seed's own network (the paper's diagnostic)."""
    import plasticity_metrics

    generators = [torch.Generator().manual_seed(seed) for seed in (3, 4)]
    critic = ppo.Critic(5, network_args(), generators)
    optimizer = ppo.SeedwiseAdam(critic.parameters(), lr=1e-3)
    obs = torch.randn(2, 32, 5, generator=torch.Generator().manual_seed(0))
    (critic(obs) ** 2).mean(-1).sum().backward()
    logged = optimizer.max_abs_gradients()
    for k in range(2):
        single = ppo.single_seed_network(critic, k)
        for parameter, source in zip(single.parameters(), critic.parameters()):
            parameter.grad = source.grad[k : k + 1].clone()
        assert logged[k].item() == plasticity_metrics.max_abs_gradient(single)
    assert logged[0].item() != logged[1].item()


def test_every_field_the_scripts_set_on_the_run_is_declared_in_run():
    """Run's fields are declared in one place (its class body, grouped): every ``run.X = ...`` (or ``self.X`` in
    Run's methods) anywhere in every script is one of them, so a new field cannot hide in a function."""
    import ast
    import glob

    from tiny_run import REPO_ROOT

    declared = set(ppo.Run.__annotations__)
    for path in sorted(glob.glob(os.path.join(REPO_ROOT, "*_continuous.py"))):
        with open(path) as f:
            tree = ast.parse(f.read())
        run_class = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Run")
        in_run = {id(node) for node in ast.walk(run_class)}
        assigned = set()
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                for element in ast.walk(target):
                    if (isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name)
                            and (element.value.id == "run" or (element.value.id == "self" and id(node) in in_run))):
                        assigned.add(element.attr)
        assert assigned - declared == set(), os.path.basename(path)
        assert {"global_step", "agent", "stats", "progress"} <= assigned  # the walk finds them


# ---- The network flags (since v0.2, 2026-11-27: studies/2026-11-27_why_ppo_does_not_walk_on_ant): each reading
# of the paper's unstated choices that the plumbing's layers, input and optimizer step carry out ----


def test_init_torch_is_nn_linears_own_initialization_per_seed():
    """--init torch: seed k's slice is bit for bit the nn.Linear that torch's global RNG, seeded like seed k's
    generator, draws (reset_parameters: weights then biases, uniform in +-1/sqrt(fan_in))."""
    layer = ppo.layer_init(ppo.StackedLinear(2, 9, 4), generators(11, 12), init="torch")
    for k, seed in enumerate((11, 12)):
        torch.manual_seed(seed)
        reference = torch.nn.Linear(9, 4)
        assert torch.equal(layer.weight[k], reference.weight.data)
        assert torch.equal(layer.bias[k, 0], reference.bias.data)
    wide = ppo.layer_init(ppo.StackedLinear(1, 400, 300), generators(3), init="torch")
    bound = 1 / math.sqrt(400)
    assert wide.weight.abs().max() <= bound and wide.bias.abs().max() <= bound
    # the uniform law's variance, bound^2 / 3, over 120,000 draws (standard error of the estimate ~0.3%)
    assert abs(wide.weight.var().item() / (bound**2 / 3) - 1) < 0.02


@pytest.mark.parametrize("layer_norm", ["affine", "plain", "none"])
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_trunk_is_linear_layernorm_activation_as_the_flags_say(layer_norm, activation):
    """Each hidden layer is Linear, then LayerNorm (with gain and shift, without, or none), then the activation;
    hidden_activations gives both activations' outputs, which the forward pass recomputes by hand."""
    args = network_args(layer_norm=layer_norm, activation=activation)
    critic = ppo.Critic(6, args, generators(1, 2))
    x = torch.randn(2, 5, 6)
    norm_params = sum(p.numel() for m in critic.trunk if isinstance(m, ppo.StackedLayerNorm) for p in m.parameters())
    assert norm_params == {"affine": 2 * 2 * 2 * 16, "plain": 0, "none": 0}[layer_norm]
    assert sum(isinstance(m, ppo.StackedLayerNorm) for m in critic.trunk) == (0 if layer_norm == "none" else 2)
    h, by_hand = x, []
    for linear in [m for m in critic.trunk if isinstance(m, ppo.StackedLinear)]:
        h = linear(h)
        if layer_norm != "none":  # gain 1 and shift 0 at initialization: the same as the plain LayerNorm
            h = torch.nn.functional.layer_norm(h, (16,))
        h = torch.relu(h) if activation == "relu" else torch.tanh(h)
        by_hand.append(h)
    for got, expected in zip(critic.hidden_activations(x), by_hand, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_plain_stacked_layer_norm_is_nn_layernorm_without_affine():
    x = torch.randn(3, 4, 8)
    norm = ppo.StackedLayerNorm(3, 8, affine=False)
    assert list(norm.parameters()) == []
    assert torch.equal(norm(x), torch.nn.LayerNorm(8, elementwise_affine=False)(x))


def test_network_input_is_normalized_or_raw_in_the_same_shape():
    rms = ppo.RunningMeanStd(2, (3,))
    rms.update(np.random.default_rng(0).normal(5.0, 2.0, size=(2, 50, 3)))
    batch, final = np.random.default_rng(1).normal(size=(2, 4, 3)), np.array([1.0, -2.0, 30.0])
    normalized, raw = network_args(norm_obs=True), network_args(norm_obs=False)
    assert np.array_equal(ppo.network_input(rms, batch, normalized), rms.normalize(batch, 10.0))
    assert np.array_equal(ppo.network_input(rms, batch, raw), batch.astype(np.float32))
    # one final observation gets the statistics' (seeds, 1, obs_dim) shape either way (the rollout indexes [k, 0])
    assert ppo.network_input(rms, final, normalized).shape == ppo.network_input(rms, final, raw).shape == (2, 1, 3)
    assert np.array_equal(ppo.network_input(rms, final, raw)[1, 0], final.astype(np.float32))


def test_joint_optimizer_steps_as_one_adam_over_both_networks():
    """--joint-optimizer: optimizer_step with the actor's and the critic's SeedwiseAdam equals SB3's one
    torch.optim.Adam over both networks after one clip_grad_norm_ over all their gradients, per seed; the critic
    loss enters with --vf-coef. Without it each network is clipped by its own norm (the reference then differs)."""
    args = network_args(joint_optimizer=True, vf_coef=0.5, max_grad_norm=0.5)
    actor, critic = ppo.Actor(5, 2, args, generators(1, 2)), ppo.Critic(5, args, generators(1, 2))
    singles = [(ppo.single_seed_network(actor, k), ppo.single_seed_network(critic, k)) for k in range(2)]
    run = ppo.Run()
    run.seeds, run.args, run.device = [1, 2], args, torch.device("cpu")
    run.consecutive_nonfinite = np.zeros(2, np.int64)
    run.agent = ppo.Agent(actor=actor, critic=critic,
                          actor_optimizer=ppo.SeedwiseAdam(actor.parameters(), lr=3e-4, eps=1e-5),
                          critic_optimizer=ppo.SeedwiseAdam(critic.parameters(), lr=3e-4, eps=1e-5))
    run.global_step, run.total_steps, run.exit_code, run.iteration = 0, 1, 0, 0
    assert run.next_iteration()  # sets the per-update fields that optimizer_step adds to
    references = [torch.optim.Adam([*a.parameters(), *c.parameters()], lr=3e-4, eps=1e-5, fused=True)
                  for a, c in singles]
    obs = torch.randn(2, 16, 5, generator=torch.Generator().manual_seed(0))
    targets = 100.0 * torch.randn(2, 16, generator=torch.Generator().manual_seed(1))  # a critic gradient that dominates

    def losses(a, c, x, y):
        return {"actor": (a(x) ** 2).mean((-2, -1)), "critic": args.vf_coef * ((c(x) - y) ** 2).mean(-1)}

    for _ in range(3):
        ppo.optimizer_step(run, losses(actor, critic, obs, targets))
        for k, ((a, c), reference) in enumerate(zip(singles, references)):
            reference.zero_grad()
            sum(losses(a, c, obs[k : k + 1], targets[k : k + 1]).values()).sum().backward()
            norm = torch.nn.utils.clip_grad_norm_([*a.parameters(), *c.parameters()], 0.5)
            assert norm > 0.5  # the clip acts
            torch.testing.assert_close(run.stats.grad_norms["critic"][k], norm, rtol=1e-6, atol=0)
            reference.step()
    for k, (a, c) in enumerate(singles):
        for network, single in ((actor, a), (critic, c)):
            for stacked, parameter in zip(network.parameters(), single.parameters()):
                torch.testing.assert_close(stacked.detach()[k : k + 1], parameter.detach(), rtol=0, atol=1e-7)


# ---- The helpers for plasticity methods (hidden_layers, fresh_draw, steps_taken) ----


@pytest.mark.parametrize("flags", [{}, {"init": "torch"}, {"layer_norm": "plain"},
                                   {"layer_norm": "none", "policy_head_gain": 0.5}])
def test_fresh_draw_repeats_each_layers_own_initializer(flags):
    """A fresh draw of any layer from the generator that built the network, in the same state, is that layer's
    initial weights and bias bit for bit: the scheme and the gain (hidden sqrt(2), policy head --policy-head-gain,
    value head 1, or nn.Linear's) are the layer's own. The first hidden layer is the first draw of a generator."""
    args = network_args(**flags)
    actor, critic = ppo.Actor(5, 3, args, generators(11, 12)), ppo.Critic(5, args, generators(11, 12))
    for network, head in ((actor, actor.mean_head), (critic, critic.head)):
        layers = ppo.hidden_layers(network)
        assert [incoming for incoming, _, _ in layers] == [m for m in network.trunk if isinstance(m, ppo.StackedLinear)]
        assert layers[-1][2] is head and layers[0][2] is layers[1][0]
        assert all((norm is None) == (args.layer_norm == "none") for _, norm, _ in layers)
        for k, seed in enumerate((11, 12)):
            weight, bias = ppo.fresh_draw(layers[0][0], torch.Generator().manual_seed(seed))
            assert torch.equal(weight, layers[0][0].weight[k].detach())
            assert torch.equal(bias, layers[0][0].bias[k, 0].detach())
    # a head: drawn with its own gain, so its rows have norm gain (orthogonal, more inputs than outputs)
    if args.init == "orthogonal":
        weight, bias = ppo.fresh_draw(actor.mean_head, torch.Generator().manual_seed(3))
        assert torch.allclose(weight @ weight.T, args.policy_head_gain**2 * torch.eye(3), atol=1e-6)
        assert torch.equal(bias, torch.zeros(3))
        value_weight, _ = ppo.fresh_draw(critic.head, torch.Generator().manual_seed(3))
        assert torch.allclose(value_weight.norm(), torch.tensor(1.0))


def test_hidden_layers_refuses_a_network_with_two_heads():
    critic = ppo.Critic(5, network_args(), generators(1))
    critic.second_head = ppo.StackedLinear(1, 16, 1)
    with pytest.raises(ValueError, match="2 output layers"):
        ppo.hidden_layers(critic)


def test_steps_taken_counts_each_seeds_steps_and_survives_a_state_dict_round_trip():
    """Seed 0 steps three times, seed 1 skips the second step: (3, 2); a new optimizer loaded from the state dict
    (a resume) goes on from there."""
    critic = ppo.Critic(4, network_args(), generators(1, 2))
    optimizer = ppo.SeedwiseAdam(critic.parameters(), lr=1e-3)
    assert optimizer.steps_taken().tolist() == [0, 0]
    for stepping in (None, np.array([True, False]), np.array([True, True])):
        optimizer.zero_grad()
        critic(torch.randn(2, 8, 4)).sum().backward()
        optimizer.step(stepping)
    assert optimizer.steps_taken().tolist() == [3, 2] and optimizer.steps_taken().dtype == np.int64
    resumed = ppo.SeedwiseAdam(critic.parameters(), lr=1e-3)
    resumed.load_state_dict(optimizer.state_dict())
    assert resumed.steps_taken().tolist() == [3, 2]


# ---- Each network's initial parameters per seed (initial_parameters), and reductions over stacked parameters ----


def test_a_reduction_over_a_seeds_contiguous_entries_does_not_depend_on_the_seeds_beside_it():
    """The rule for a method's reductions over stacked parameters (docs/reading-guide.md): seed k's value of
    ||p - p0||^2 (and of its sum, mean, norm, max) computed from a stack of 3 or 5 seeds, over its slice p[k] or
    over the non-seed axes of the stack, is bit for bit that of a one-seed stack; so is the gradient of
    lambda ||p - p0||^2. Shapes as the networks' (seed k's slice of a log std starts at a misaligned offset)."""
    reductions = {"sum of squares": lambda d: d.square().sum(), "norm() ** 2": lambda d: d.norm() ** 2,
                  "vector_norm": torch.linalg.vector_norm, "mean": lambda d: d.square().mean(),
                  "max": lambda d: d.abs().max(), "sum over the first axis": lambda d: d.square().sum(0)}
    over_the_stack = {"sum of squares": lambda d: d.square().flatten(1).sum(1),
                      "norm() ** 2": lambda d: d.flatten(1).norm(dim=1) ** 2,
                      "vector_norm": lambda d: torch.linalg.vector_norm(d.flatten(1), dim=1),
                      "mean": lambda d: d.square().flatten(1).mean(1), "max": lambda d: d.abs().flatten(1).amax(1),
                      "sum over the first axis": lambda d: d.square().sum(1)}
    generator = torch.Generator().manual_seed(0)
    for shape in ((256, 17), (256, 256), (6, 256), (1, 256), (1, 6), (1, 1), (64, 105)):
        for num_seeds in (3, 5):
            p = torch.randn(num_seeds, *shape, generator=generator)
            p0 = torch.randn(num_seeds, *shape, generator=generator)
            stacked = p.clone().requires_grad_()
            (0.01 * (stacked - p0).square().flatten(1).sum(1)).sum().backward()
            for k in range(num_seeds):
                alone, alone0 = p[k : k + 1].clone(), p0[k : k + 1].clone()  # seed k in a run of its own
                for name, reduce in reductions.items():
                    expected = reduce((alone - alone0)[0])
                    assert torch.equal(reduce(p[k] - p0[k]), expected), (name, shape, num_seeds, k)
                    assert torch.equal(over_the_stack[name](p - p0)[k], expected), (name, shape, num_seeds, k)
                alone.requires_grad_()
                (0.01 * (alone - alone0).square().flatten(1).sum(1)).sum().backward()
                assert torch.equal(stacked.grad[k], alone.grad[0]), (shape, num_seeds, k)


def built_run(args, seeds) -> "ppo.Run":
    """A Run as start_run builds it (the simulations and make_agent's agent, from each seed's generator), no outputs."""
    run = ppo.Run()
    run.args, run.seeds, run.device = args, list(seeds), torch.device("cpu")
    run.generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    run.config_args = {seed: {} for seed in seeds}
    ppo.build(run)
    run.raw_obs = run.env.reset(None, [seed + i for seed in seeds for i in range(args.num_envs)]).reshape(
        len(seeds), args.num_envs, -1)
    return run


def test_initial_parameters_as_an_agent_entry_are_a_one_seed_build_and_survive_a_checkpoint(tmp_path):
    """initial_parameters(network), kept by a method as an agent entry (its theta_0), is bit for bit what a one-seed
    build of seed k draws, for every parameter of every network (Linear, LayerNorm, log std), and a copy: training
    does not move it. The checkpoint stores it per seed like any agent entry, and a resume reads it from there (an
    edited copy comes back edited)."""
    from tiny_run import TINY_FLAGS

    args = ppo.parse_args([*TINY_FLAGS, "--num-seeds", "2", "--run-dir", str(tmp_path / "seed{seed}")])
    run = built_run(args, (1, 2))
    for network in ("actor", "critic"):
        setattr(run.agent, f"initial_{network}", ppo.initial_parameters(getattr(run.agent, network)))
    assert {"log_std", "trunk.1.weight", "mean_head.bias"} <= set(run.agent.initial_actor)  # every parameter
    with torch.no_grad():
        for parameter in run.agent.actor.parameters():
            parameter.add_(1.0)  # "trained": the initial copy must not follow
    for k, seed in enumerate((1, 2)):
        one_seed = built_run(ppo.dataclasses.replace(args, num_seeds=1, seed=seed), (seed,)).agent
        for network in ("actor", "critic"):
            built = dict(getattr(one_seed, network).named_parameters())
            initial = getattr(run.agent, f"initial_{network}")
            assert initial.keys() == built.keys()
            for name, parameter in built.items():
                assert torch.equal(initial[name][k], parameter.detach()[0]), (seed, network, name)

    checkpoints = [run.checkpoint_state(k) for k in range(2)]
    assert checkpoints[1]["initial_actor"]["log_std"].shape[0] == 1  # seed 2's slice, in a one-seed run's format
    for checkpoint in checkpoints:
        checkpoint["initial_actor"]["log_std"] += 1.0
    resumed = built_run(args, (1, 2))
    resumed.agent.initial_actor = ppo.initial_parameters(resumed.agent.actor)
    resumed.agent.initial_critic = ppo.initial_parameters(resumed.agent.critic)
    resumed.load(checkpoints)
    assert torch.equal(resumed.agent.initial_actor["log_std"], run.agent.initial_actor["log_std"] + 1.0)
    for name, value in run.agent.initial_critic.items():
        assert torch.equal(resumed.agent.initial_critic[name], value)


# ---- Several seeds in one process: what --num-seeds refuses ----


@pytest.mark.parametrize("flags, message", [
    (["--num-seeds", "2", "--run-dir", "runs/x"], "--run-dir must be a path with {seed} (e.g. runs/my_run/seed{seed}: "
                                                  "a directory per seed) with --num-seeds 2, got runs/x"),
    (["--num-seeds", "3", "--run-dir", "runs/x/seed{seed}", "--track"], "--track must be off with --num-seeds 3"),
])
def test_batched_seeds_refuse_a_shared_run_dir_and_track(flags, message):
    """Several seeds in one process: a --run-dir without {seed} (the seeds would share one directory) and --track
    (one W&B run per process) exit 2 with one line naming the flag; each alone, with one seed, is accepted."""
    with pytest.raises(ppo.RunConfigError) as stopped:
        ppo.parse_args(flags)
    assert message in str(stopped.value) and len(str(stopped.value).splitlines()) == 1
    assert ppo.parse_args(["--num-seeds", "1", *flags[2:]]).num_seeds == 1



# ---- check_flags: a table of flag rules, one line per broken rule ----


def test_check_flags_names_the_first_broken_rule_of_each_kind_in_one_line():
    """Each rule of RULES and a rule of one's own (a test and its text), broken, raise one line naming the flag,
    what it must be and the value; NaN breaks every rule; a field of several names is each name's rule; a table
    that every value keeps passes, and the first broken row of a table is the one named."""
    args = ppo.Args()
    broken = [("num_envs", 0, "a positive integer"), ("learning_rate", 0.0, "> 0"), ("ent_coef", -0.5, ">= 0"),
              ("clip_coef", math.inf, "a finite number >= 0"), ("gae_lambda", 1.5, "in [0, 1]"),
              ("gamma", 0.0, "in (0, 1]")]
    for name, value, rule in broken:
        assert rule in ppo.RULES
        flag = "--" + name.replace("_", "-")
        for bad in (value, math.nan) if isinstance(value, float) else (value,):
            with pytest.raises(ValueError) as raised:
                ppo.check_flags(ppo.Args(**{name: bad}), {name: rule})
            assert str(raised.value) == f"{flag} must be {rule}, got {bad}"
        ppo.check_flags(args, {name: rule})  # the default keeps it
    with pytest.raises(ValueError, match=r"^--minibatch-size must be a power of 2, got 100$"):
        ppo.check_flags(ppo.Args(minibatch_size=100),
                        {"minibatch_size": (lambda value: value & (value - 1) == 0, "a power of 2")})
    with pytest.raises(ValueError, match=r"^--update-epochs must be a positive integer, got 0$"):
        ppo.check_flags(ppo.Args(update_epochs=0), {"num_steps update_epochs hidden_dim": "a positive integer"})
    with pytest.raises(ValueError, match=r"^--gamma must be in \(0, 1\], got 2.0$"):  # the first row broken, of two
        ppo.check_flags(ppo.Args(gamma=2.0, learning_rate=-1.0), {"gamma": "in (0, 1]", "learning_rate": "> 0"})
    ppo.check_flags(args, {"num_steps update_epochs hidden_dim": "a positive integer", "gamma": "in (0, 1]",
                           "learning_rate clip_coef": "> 0", "ent_coef": ">= 0", "gae_lambda": "in [0, 1]"})


def epochs_of_minibatch_indices(shuffle_minibatches: bool, epochs: int = 3) -> tuple:
    """Each epoch's minibatch indices (seeds, minibatch) of minibatches on a two-seed run of batch 24 in minibatches
    of 8, and the seeds' generator states before and after the epochs."""
    run = ppo.Run()
    run.args = ppo.Args(minibatch_size=8, shuffle_minibatches=shuffle_minibatches)
    run.batch_size, run.device, run.generators = 24, torch.device("cpu"), generators(3, 4)
    run.seed_rows = torch.arange(2)[:, None]
    run.consecutive_nonfinite = np.zeros(2, np.int64)
    before = [generator.get_state() for generator in run.generators]
    indices = [[mb.index for mb in ppo.minibatches(run, {})] for _ in range(epochs)]
    return indices, before, [generator.get_state() for generator in run.generators]


def test_no_shuffle_minibatches_are_the_batch_in_order_every_epoch_and_draw_nothing():
    """--no-shuffle-minibatches (ObjectRL): every epoch, for every seed, arange slices of the batch in order, and the
    seeds' generators are not advanced; the default draws each seed its own fresh permutation per epoch."""
    in_order, before, after = epochs_of_minibatch_indices(shuffle_minibatches=False)
    for epoch in in_order:
        assert [index.tolist() for index in epoch] == [[list(range(start, start + 8))] * 2 for start in (0, 8, 16)]
    assert all(torch.equal(b, a) for b, a in zip(before, after))
    shuffled, before, after = epochs_of_minibatch_indices(shuffle_minibatches=True)
    permutations = [torch.cat(epoch, dim=1) for epoch in shuffled]  # (seeds, batch) per epoch
    assert all(sorted(row.tolist()) == list(range(24)) for permutation in permutations for row in permutation)
    assert not torch.equal(permutations[0], permutations[1]) and not torch.equal(permutations[0][0], permutations[0][1])
    assert not any(torch.equal(b, a) for b, a in zip(before, after))
