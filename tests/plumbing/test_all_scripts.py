"""End-to-end properties every algorithm script must have (parametrized over the scripts that exist).

Each test runs a script for a few hundred steps in a subprocess (see tiny_run.py); together they check the
evaluation protocol, reproducibility, checkpoint/resume, preemption, bad input and non-finite guards.
"""

import copy
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

import golden_outputs
from tiny_run import (MID_ROLLOUT_EVALUATION_STEPS, MID_ROLLOUT_FLAGS, MID_ROLLOUT_STEPS_PER_TASK, REPO_ROOT,
                      TINY_EVALUATION_STEPS, assert_refused_in_one_line, assert_same_run_state, cannot_run,
                      directory_bytes, first_difference, load_checkpoint_file, method_event_flags, read_csv,
                      run_command, run_patched, run_script, run_signalled_at_task_change,
                      run_until_checkpoint_then_stop, start_stopped_at_task_change, two_seed_flags)

# as scripts.sync_plumbing, not with scripts/ on sys.path: there scripts/coverage.py would shadow the `coverage`
# package that numba (imported by umap in tests/tools/test_coverage.py) probes for
from scripts import sync_plumbing  # noqa: E402


def is_complete_script(script: str) -> bool:
    with open(os.path.join(REPO_ROOT, script)) as f:
        return 'if __name__ == "__main__":' in f.read()


# Every top-level *_continuous.py (discovered as sync_plumbing.py does: a new method needs no list), the template
# first: the single-script tests below run SCRIPTS[0]. One still being written (no main guard yet) is left out.
SCRIPTS = [s for s in (sync_plumbing.TEMPLATE, *sync_plumbing.SCRIPTS) if is_complete_script(s)]
# The scripts with a reference to compare with (those of golden_outputs.REFERENCE_COMMIT): a new one has none.
GOLDEN_SCRIPTS = [s for s in SCRIPTS if s in golden_outputs.golden_scripts()]


def evaluation_rows(run_dir) -> list:
    return [(int(r["global_step"]), int(r["task"])) for r in read_csv(os.path.join(run_dir, "evaluations.csv"))]


@pytest.fixture(scope="module", params=SCRIPTS)
def finished_run(request, tmp_path_factory):
    """One tiny run per script, shared by the tests that only read its outputs."""
    run_dir = tmp_path_factory.mktemp(request.param.replace(".py", "")) / "run"
    result = run_script(request.param, run_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return request.param, run_dir


def test_tiny_run_writes_the_paper_protocol(finished_run):
    script, run_dir = finished_run
    assert evaluation_rows(run_dir) == TINY_EVALUATION_STEPS
    rows = read_csv(os.path.join(run_dir, "evaluations.csv"))
    for row in rows:
        assert int(row["episodes"]) == 2
        assert float(row["return_min"]) <= float(row["return_mean"]) <= float(row["return_max"])
    plasticity = [(int(r["global_step"]), int(r["task"]), r["network"])
                  for r in read_csv(os.path.join(run_dir, "plasticity.csv"))]
    # step 0 and the end of both tasks, for the critic and the actor
    assert plasticity == [(s, t, n) for s, t in [(0, 0), (256, 0), (512, 1)] for n in ("critic", "actor")]
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    assert config["script"] == script and config["args"]["steps_per_task"] == 256 and config["total_steps"] == 512
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    assert summary["status"] == "finished" and summary["global_step"] == 512 and summary["train_sps"] > 0


# The run-directory checks are plumbing, byte for byte the same in every script (the plumbing test): the template's
# finished run stands for every script's (indirect: the fixture's ppo instance, not a run of its own).
TEMPLATE_ONLY = pytest.mark.parametrize("finished_run", SCRIPTS[:1], indirect=True)


@TEMPLATE_ONLY
def test_rerun_of_a_finished_run_exits_at_once(finished_run):
    script, run_dir = finished_run
    before = read_csv(os.path.join(run_dir, "evaluations.csv"))
    result = run_script(script, run_dir)
    assert result.returncode == 0 and "already holds a finished run" in result.stdout
    assert read_csv(os.path.join(run_dir, "evaluations.csv")) == before


def expected_outputs(script: str, num_seeds: int) -> dict:
    """REFERENCE_COMMIT's fingerprints of the tiny run on this machine (golden_outputs.py), or a skip naming why
    there are none (a shallow clone on a machine unlike the one tests/golden was recorded on); in CI a failure."""
    try:
        return golden_outputs.expected_fingerprints(script, num_seeds)
    except golden_outputs.GoldenUnavailable as reason:
        cannot_run(str(reason))


def test_a_golden_comparison_that_cannot_run_fails_in_ci(monkeypatch):
    """Without a reference for this machine the golden comparison skips with the reason, and fails with it when
    the CI environment variable is set (tests/harness/test_ci_guards.py)."""
    def unavailable(script, num_seeds, commit=None):
        raise golden_outputs.GoldenUnavailable("the reference commit is not in this clone's history")

    monkeypatch.setattr(golden_outputs, "expected_fingerprints", unavailable)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not in this clone's history"):
        expected_outputs(SCRIPTS[0], 1)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="not in this clone's history"):
        expected_outputs(SCRIPTS[0], 1)


def assert_matches_golden(fingerprints: dict, expected: dict) -> None:
    changed = golden_outputs.differences(fingerprints, expected)
    if changed:  # the list itself, without pytest's repetition of it
        pytest.fail(f"outputs differ from those of REFERENCE_COMMIT {golden_outputs.REFERENCE_COMMIT[:10]} (a "
                    "deliberate change moves it, see tests/golden_outputs.py):\n" + "\n".join(changed), pytrace=False)


def test_outputs_equal_the_golden_outputs_of_one_seed(finished_run):
    """The tiny run's evaluations, plasticity rows and final checkpoint (every tensor) are bit for bit those of
    the same run of golden_outputs.REFERENCE_COMMIT's script on this machine."""
    script, run_dir = finished_run
    if script not in GOLDEN_SCRIPTS:  # finished_run's other tests still run for it
        pytest.skip(f"{script} is new since {golden_outputs.REFERENCE_COMMIT[:10]}: no reference outputs")
    assert_matches_golden({"1": golden_outputs.fingerprint(run_dir)}, expected_outputs(script, 1))


@pytest.mark.parametrize("commit,flags,script", [
    (commit, flags, script) for commit, flags in golden_outputs.EARLIER_DEFAULTS
    for script in SCRIPTS if script in golden_outputs.golden_scripts(commit=commit)],
    ids=lambda value: "flags" if isinstance(value, tuple) else value if value.endswith(".py") else value[:10])
def test_the_previous_defaults_are_one_set_of_flags_away(commit, flags, script, tmp_path):
    """Each earlier set of defaults, given as flags (golden_outputs.EARLIER_DEFAULTS: v0.1's, before 2026-11-27, and
    --no-norm-reward for v0.2's, before 2026-11-29; CHANGELOG.md), reproduces the tiny run of the last commit whose
    defaults they were bit for bit, so an old result can be rerun whatever the defaults are now."""
    try:
        expected = golden_outputs.expected_fingerprints(script, 1, commit=commit)
    except golden_outputs.GoldenUnavailable as reason:
        cannot_run(str(reason))
    result = run_script(script, tmp_path / "run", *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    changed = golden_outputs.differences({"1": golden_outputs.fingerprint(tmp_path / "run")}, expected)
    assert not changed, f"the previous defaults' outputs differ from those of {commit[:10]}:\n" + "\n".join(changed)


@pytest.mark.every_script  # conftest's --script keeps it
def test_the_plumbing_block_is_byte_identical_in_every_script():
    """Below its marker line every algorithm script holds the same plumbing, byte for byte, and its Args ends with
    the same run settings (the template's are copied with scripts/sync_plumbing.py); the rest is the method. Args
    is one class: every field the method half reads is declared in it."""
    template_method, template = sync_plumbing.split(sync_plumbing.read(sync_plumbing.TEMPLATE), sync_plumbing.TEMPLATE)
    settings = sync_plumbing.split_args(template_method, sync_plumbing.TEMPLATE)[1]
    assert len(template.splitlines()) > 500  # the block really holds the plumbing
    assert {"seed", "num_seeds", "env_id", "num_envs", "run_dir", "eval_episodes"} <= set(
        re.findall(r"^    (\w+):", settings, re.M))
    for script in sync_plumbing.SCRIPTS:
        method, block = sync_plumbing.split(sync_plumbing.read(script), script)
        assert block == template, f"{script}: its plumbing differs from ppo_continuous.py's (scripts/sync_plumbing.py)"
        assert sync_plumbing.split_args(method, script)[1] == settings, f"{script}: its run settings differ"
        assert "def main(argv: list) -> int:" in method
    for script in SCRIPTS:
        text = sync_plumbing.read(script)
        assert text.count("class Args") == 1, f"{script}: Args is declared more than once"
        method = sync_plumbing.split(text, script)[0]
        declared = set(re.findall(r"^    (\w+): ", method[method.index("class Args"):], re.M))
        assert set(re.findall(r"\bargs\.(\w+)", method)) <= declared, script




def test_the_run_state_comparison_finds_one_flipped_bit_and_names_where():
    """tiny_run.first_difference (what assert_same_run_state reports): equal states, NaN included, are equal; a
    sign bit (0.0 against -0.0), a dtype, a plain value, a list's length, a missing key or a CSV line is a
    difference, named by its place."""
    state = {"evaluations.csv": b"global_step,task\r\n0,0\r\n128,0\r\n",
             "checkpoint.pt": {"actor": {"w": torch.tensor([0.0, float("nan")])}, "global_step": 128,
                               "obs_rms": {"mean": np.zeros((1, 1, 3)), "count": 1e-4},
                               "env_states": [{"elapsed_steps": 3, "np_random_state": {"state": 12345}}]}}
    assert first_difference(state, copy.deepcopy(state)) == ""
    checkpoint = "['checkpoint.pt']"
    changes = [(lambda c: c["actor"]["w"].__setitem__(0, -0.0), f"{checkpoint}['actor']['w'] differs"),
               (lambda c: c["obs_rms"].update(mean=np.zeros((1, 1, 3), np.float32)),
                f"{checkpoint}['obs_rms']['mean']: float64[1, 1, 3] against float32[1, 1, 3]"),
               (lambda c: c["env_states"][0]["np_random_state"].update(state=12346),
                f"{checkpoint}['env_states'][0]['np_random_state']['state']: 12345 against 12346"),
               (lambda c: c["env_states"].append({}), f"{checkpoint}['env_states']: 1 entries against 2"),
               (lambda c: c.pop("global_step"), f"{checkpoint}: keys")]
    for change, expected in changes:
        changed = copy.deepcopy(state)
        change(changed["checkpoint.pt"])
        assert first_difference(state, changed).startswith(expected), expected
    changed = {**state, "evaluations.csv": state["evaluations.csv"].replace(b"128,0", b"128,1")}
    assert first_difference(state, changed) == "['evaluations.csv'] line 3: b'128,0' against b'128,1'"


@pytest.mark.parametrize("script", SCRIPTS)
def test_two_seed_run_is_golden_resumes_bit_for_bit_and_each_seed_is_independent(script, tmp_path):
    """One straight run of seeds 1 and 2 in one process (tiny_run.two_seed_flags: the method's events, misaligned
    slices, checkpoints, saved states), checked three ways:
    - its outputs are bit for bit those of golden_outputs.REFERENCE_COMMIT's script (the golden outputs of two seeds);
    - SIGTERM mid-run -> checkpoints + exit 75, and re-running resumes both seeds to the straight run's state, bit
      for bit (tiny_run.run_state: logs, summary, saved states and every entry of the final checkpoint);
    - seed 1 is bit for bit the same at position 1 of a group (--seed 0, envs stepped from two threads) and alone
      (--num-seeds 1): a seed does not depend on the seeds beside it (and two processes of one seed agree)."""
    flags = two_seed_flags(script)
    straight = tmp_path / "straight"
    result = run_script(script, straight / "seed{seed}", *flags)
    assert result.returncode == 0, result.stderr[-3000:]

    interrupted = tmp_path / "interrupted"
    stopped = run_until_checkpoint_then_stop(script, interrupted / "seed{seed}",
                                             interrupted / "seed2" / "checkpoint.pt", *flags)
    assert stopped.returncode == 75, (stopped.stdout[-2000:], stopped.stderr[-2000:])
    assert not (interrupted / "seed1" / "summary.json").exists()
    stopped_at = load_checkpoint_file(interrupted / "seed1" / "checkpoint.pt")["global_step"]
    assert 0 < stopped_at < 512
    resumed = run_script(script, interrupted / "seed{seed}", *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for seed in (1, 2):
        assert f"resuming {interrupted / f'seed{seed}'} from global_step {stopped_at}" in resumed.stdout
        assert_same_run_state(straight / f"seed{seed}", interrupted / f"seed{seed}")
        # the visited states (--save-states, part of the run state compared above): every 4th training observation
        with np.load(straight / f"seed{seed}" / "states.npz") as a:
            assert a["observations"].dtype == np.float16 and a["observations"].shape == (512 // 4, 17)
            assert np.array_equal(a["global_steps"], np.arange(4, 513, 4))
    # the two seeds are different agents
    assert (straight / "seed1" / "evaluations.csv").read_text() != (straight / "seed2" / "evaluations.csv").read_text()

    for name, seed, num_seeds, threads in (("second", 0, 2, 2), ("alone", 1, 1, 1)):
        result = run_script(script, tmp_path / name / "seed{seed}", *flags, "--seed", seed, "--num-seeds", num_seeds,
                            "--env-threads", threads)
        assert result.returncode == 0, result.stderr[-3000:]
        assert_same_run_state(straight / "seed1", tmp_path / name / "seed1")

    # last, as it may skip: the golden outputs (a script new since the reference has none)
    if script not in GOLDEN_SCRIPTS:
        pytest.skip(f"{script} is new since {golden_outputs.REFERENCE_COMMIT[:10]}: no reference outputs (the resume "
                    "and seed-independence checks passed)")
    assert_matches_golden({str(seed): golden_outputs.fingerprint(straight / f"seed{seed}") for seed in (1, 2)},
                          expected_outputs(script, 2))


@pytest.mark.parametrize("script", SCRIPTS[:1])
def test_truncated_checkpoint_falls_back_to_the_previous_one(script, tmp_path):
    run_dir = tmp_path / "run"
    flags = ["--checkpoint-frequency", "128", "--num-tasks", "1"]
    assert run_script(script, run_dir, *flags).returncode == 0
    reference = read_csv(run_dir / "evaluations.csv")
    os.remove(run_dir / "summary.json")  # pretend the run died after its last checkpoint
    previous_step = load_checkpoint_file(run_dir / "checkpoint.prev.pt")["global_step"]
    with open(run_dir / "checkpoint.pt", "r+b") as f:
        f.truncate(os.path.getsize(run_dir / "checkpoint.pt") // 2)
    resumed = run_script(script, run_dir, *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "unreadable" in resumed.stderr and f"from global_step {previous_step}" in resumed.stdout
    assert read_csv(run_dir / "evaluations.csv") == reference


def test_unresumable_checkpoints_are_refused_not_discarded(tmp_path):
    """A run directory whose checkpoints are all unreadable keeps what it logged: exit 2 naming --overwrite."""
    run_dir = tmp_path / "run"
    flags = ["--checkpoint-frequency", "128", "--num-tasks", "1"]
    assert run_script(SCRIPTS[0], run_dir, *flags).returncode == 0
    os.remove(run_dir / "summary.json")
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        (run_dir / name).write_bytes(b"not a checkpoint")
    logged = (run_dir / "evaluations.csv").read_text()
    refused = run_script(SCRIPTS[0], run_dir, *flags)
    assert refused.returncode == 2 and "--overwrite" in refused.stderr and "Traceback" not in refused.stderr
    assert (run_dir / "evaluations.csv").read_text() == logged
    restarted = run_script(SCRIPTS[0], run_dir, *flags, "--overwrite")
    assert restarted.returncode == 0 and (run_dir / "evaluations.csv").read_text() == logged  # deterministic replay


def test_checkpoints_hold_tensors_and_plain_values_only(finished_run):
    """torch.load(weights_only=True), which unpickles no code, reads every script's checkpoint (format 5), and the
    numpy arrays come back as the arrays they were (dtype and shape: the run state's numpy fields)."""
    script, run_dir = finished_run
    raw = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert raw["format"] == 5 and raw["numpy_arrays"]
    state = load_checkpoint_file(run_dir / "checkpoint.pt")
    assert "numpy_arrays" not in state
    for place in raw["numpy_arrays"]:
        stored, restored = raw, state
        for key in place:
            stored, restored = stored[key], restored[key]
        assert isinstance(restored, np.ndarray) and np.array_equal(restored, stored.numpy())
    assert state["obs_rms"]["mean"].dtype == np.float64 and state["episode_length"].dtype == np.int64


class WouldRunCode:
    """A pickle whose loading would call os.makedirs(path): the payload of a crafted checkpoint."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.makedirs, (self.path,)


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    """A crafted checkpoint.pt is refused without running its payload and the run resumes from checkpoint.prev.pt
    (as after a truncated file), bit for bit; with both files crafted the run exits 2 in one line naming the file,
    and the run directory is byte for byte unchanged. scripts/evaluate.py refuses it too (exit 2)."""
    run_dir, payload = tmp_path / "run", tmp_path / "payload_ran"
    flags = ["--checkpoint-frequency", "128", "--num-tasks", "1"]
    assert run_script(SCRIPTS[0], run_dir, *flags).returncode == 0
    reference = read_csv(run_dir / "evaluations.csv")
    os.remove(run_dir / "summary.json")  # pretend the run died after its last checkpoint
    previous_step = load_checkpoint_file(run_dir / "checkpoint.prev.pt")["global_step"]
    torch.save({"format": 5, "global_step": WouldRunCode(payload)}, run_dir / "checkpoint.pt")
    resumed = run_script(SCRIPTS[0], run_dir, *flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "needs code to load" in resumed.stderr and f"from global_step {previous_step}" in resumed.stdout
    assert read_csv(run_dir / "evaluations.csv") == reference and not payload.exists()

    evaluated = run_evaluate(run_dir)  # the finished run's own checkpoint.pt is safe: evaluate reads it
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    os.remove(run_dir / "summary.json")
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        torch.save({"format": 5, "global_step": WouldRunCode(payload)}, run_dir / name)
    before = directory_bytes(run_dir)
    refused = run_script(SCRIPTS[0], run_dir, *flags)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    error = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and str(run_dir / "checkpoint.pt") in error[0] and "nothing in it ran" in error[0]
    assert directory_bytes(run_dir) == before and not payload.exists()
    evaluated = run_evaluate(run_dir)
    assert evaluated.returncode == 2 and "needs code to load" in evaluated.stderr and not payload.exists()


def test_a_checkpoint_of_an_older_format_is_refused_in_one_line(tmp_path):
    """A checkpoint of an older format (3: numpy arrays pickled as such; 4: without the last evaluation return) is
    refused with one line naming the file and its format, exit 2, the directory unchanged; with
    --overwrite the run starts again and ends bit for bit as a straight run."""
    straight, run_dir = tmp_path / "straight", tmp_path / "run"
    flags = ["--checkpoint-frequency", "128", "--num-tasks", "1"]
    assert run_script(SCRIPTS[0], straight, *flags).returncode == 0
    shutil.copytree(straight, run_dir)
    os.remove(run_dir / "summary.json")  # the run died after its step-128 checkpoint, written as format 3 wrote it
    previous = load_checkpoint_file(run_dir / "checkpoint.prev.pt")
    os.remove(run_dir / "checkpoint.prev.pt")
    torch.save({**previous, "format": 3}, run_dir / "checkpoint.pt")
    before = directory_bytes(run_dir)
    refused = run_script(SCRIPTS[0], run_dir, *flags)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr and directory_bytes(run_dir) == before
    error = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "needs code to load" in error[0] and "nothing in it ran" in error[0], refused.stderr
    # format 4 (tensors only, no last evaluation return): readable without code, refused by its format
    raw = torch.load(straight / "checkpoint.prev.pt", weights_only=True)
    torch.save({**raw, "format": 4}, run_dir / "checkpoint.pt")
    before = directory_bytes(run_dir)
    refused = run_script(SCRIPTS[0], run_dir, *flags)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr and directory_bytes(run_dir) == before
    error = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "checkpoint format 4, this script reads 5" in error[0], refused.stderr
    restarted = run_script(SCRIPTS[0], run_dir, *flags, "--overwrite")
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert_same_run_state(run_dir, straight)


BAD_INPUTS = [
    (["--env-id", "Walker2d-v5"], "HalfCheetah-v5"),
    (["--env-id", "Ant-v5", "--strategy", "cross-v1"], "cross"),
    (["--experiment", "slippery", "--strategy", "sideways"], "increasing"),
    (["--steps-per-task", "0"], "--steps-per-task"),
    (["--steps-per-task", "-5"], "--steps-per-task"),
    (["--num-tasks", "10"], "--num-tasks"),
    (["--minibatch-size", "100"], "--minibatch-size"),
    (["--eval-episodes", "0"], "--eval-episodes"),
    (["--learning-rate", "-1e-3"], "--learning-rate"),
    (["--activation", "gelu"], "'relu', 'tanh'"),
    (["--layer-norm", "batch"], "'affine', 'plain', 'none'"),
    (["--init", "xavier"], "'orthogonal', 'torch'"),
    (["--init", "torch", "--policy-head-gain", "1.0"], "--policy-head-gain"),
    (["--policy-head-gain", "0"], "--policy-head-gain"),
    (["--log-std-max", "nan"], "--log-std-max"),
    (["--no-include-cfrc-ext-in-observation"], "Ant-v5 only"),
    (["--vf-coef", "1.0"], "--joint-optimizer"),
]


@pytest.mark.parametrize("flags, expected", BAD_INPUTS, ids=[" ".join(f) for f, _ in BAD_INPUTS])
def test_bad_input_is_rejected_with_a_message_naming_the_choices(flags, expected, tmp_path):
    assert_refused_in_one_line(SCRIPTS[0], tmp_path / "run", flags, expected)


# PPO's flags, which every script checks in its validate_method (the message names the flag and its range)
BAD_PPO_INPUTS = [(["--learning-rate", "0"], "--learning-rate must be > 0, got 0.0"),
                  (["--gamma", "1.5"], "--gamma must be in (0, 1], got 1.5"),
                  (["--update-epochs", "0"], "--update-epochs must be a positive integer, got 0"),
                  (["--gae-lambda", "nan"], "--gae-lambda must be in [0, 1], got nan"),
                  (["--ent-coef", "-0.01"], "--ent-coef must be >= 0, got -0.01")]


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_rejects_bad_ppo_flags_in_one_line(script, tmp_path):
    """Every script refuses each of PPO's bad values in one line with exit 2, nothing run: one of them by the
    command line (a different one per script), every one by parse_args, which raises what the command line prints."""
    import importlib

    module = importlib.import_module(script[: -len(".py")])
    for flags, expected in BAD_PPO_INPUTS:
        with pytest.raises(module.RunConfigError) as refused:
            module.parse_args(flags)
        assert str(refused.value) == expected
    flags, expected = BAD_PPO_INPUTS[SCRIPTS.index(script) % len(BAD_PPO_INPUTS)]
    assert_refused_in_one_line(script, tmp_path / "run", flags, expected)


# Every reading of the network and policy flags (v0.2, 2026-11-27: studies/2026-11-27_why_ppo_does_not_walk_on_ant)
# at once but the defaults: no contact forces, tanh, LayerNorm without gain and shift, nn.Linear's initialization, a
# fixed std of exp(-0.5), normalized observations and rewards (both off by default in v0.2, rewards normalized again
# since v0.3), one clip over both networks; and ObjectRL's minibatches in buffer order and GAE across truncations.
POLICY_FLAGS = ("--env-id", "Ant-v5", "--no-include-cfrc-ext-in-observation",
                "--activation", "tanh", "--layer-norm", "plain", "--init", "torch", "--log-std-init", "-0.5",
                "--no-learn-log-std", "--norm-obs", "--norm-reward", "--hidden-dim", "16", "--joint-optimizer",
                "--vf-coef", "0.25", "--no-shuffle-minibatches", "--gae-across-truncations")


def assert_ends_exactly_at(run_dir, evaluation_steps: list, steps_per_task: int, num_envs: int = 1) -> None:
    """A finished run evaluated at ``evaluation_steps`` ((global_step, task), the paper's protocol), measured
    plasticity at step 0 and at each task's last step, and stopped at the total, its envs on the last task."""
    assert evaluation_rows(run_dir) == evaluation_steps
    task_ends = [(0, 0)] + [(step, task) for step, task in evaluation_steps if step and step % steps_per_task == 0]
    plasticity = [(int(r["global_step"]), int(r["task"]), r["network"]) for r in read_csv(run_dir / "plasticity.csv")]
    assert plasticity == [(step, task, network) for step, task in task_ends for network in ("critic", "actor")]
    total, last_task = evaluation_steps[-1]
    with open(run_dir / "summary.json") as f:
        assert json.load(f)["global_step"] == total
    final = load_checkpoint_file(run_dir / "checkpoint.pt")
    assert final["global_step"] == total and final["task_index"] == last_task
    assert [env["task_index"] for env in final["env_states"]] == [last_task] * num_envs


@pytest.mark.parametrize("script", SCRIPTS)
def test_network_and_policy_flags_run_end_to_end(script, tmp_path):
    """The flags reach the networks of every script: the checkpoint's actor reads Ant's 27 entries without contact
    forces, has no LayerNorm parameters, is 16 wide and kept its fixed log std. Its tasks of 160 steps
    (MID_ROLLOUT_FLAGS) change and end inside rollouts of 128: the evaluations and plasticity rows are those of the
    paper's protocol, the one at the task change taken mid-rollout, and the run stops exactly at 320."""
    flags = POLICY_FLAGS
    if script == "ppo_redo_continuous.py":  # ReDo's dormancy rule is ReLU's (test_ppo_redo.py: tanh exits 2)
        flags = tuple("relu" if flag == "tanh" else flag for flag in POLICY_FLAGS)
    result = run_script(script, tmp_path / "run", *flags, *MID_ROLLOUT_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    actor = load_checkpoint_file(tmp_path / "run" / "checkpoint.pt")["actor"]
    assert torch.equal(actor["log_std"], torch.full_like(actor["log_std"], -0.5))
    assert actor["trunk.0.weight"].shape == (1, 16, 27)
    assert not any(name.startswith("trunk.1.") for name in actor)  # the plain LayerNorm has no parameters
    with open(tmp_path / "run" / "config.json") as f:
        recorded = json.load(f)["args"]
    assert not recorded["shuffle_minibatches"] and recorded["gae_across_truncations"]
    assert_ends_exactly_at(tmp_path / "run", MID_ROLLOUT_EVALUATION_STEPS, MID_ROLLOUT_STEPS_PER_TASK)


@TEMPLATE_ONLY
def test_run_dir_with_a_different_config_is_refused_unless_overwrite(finished_run):
    script, run_dir = finished_run
    refused = run_script(script, run_dir, "--seed", "7")
    assert refused.returncode == 2 and "--overwrite" in refused.stderr and "seed" in refused.stderr
    assert (run_dir / "summary.json").exists()


def test_overwrite_replaces_a_run_with_a_different_config(tmp_path):
    """--overwrite deletes the old run's outputs (its TensorBoard file too: no mix of two runs' curves) and only
    them: the user's own files in the directory survive, byte for byte."""
    run_dir = tmp_path / "run"
    assert run_script(SCRIPTS[0], run_dir, "--num-tasks", "1").returncode == 0
    old_events = sorted(name for name in os.listdir(run_dir) if name.startswith("events.out.tfevents"))
    assert old_events
    (run_dir / "notes.txt").write_text("what I tried\n")
    (run_dir / "evaluations.csv.orig").write_text("a copy the user kept\n")
    (run_dir / "analysis").mkdir()
    (run_dir / "analysis" / "plot.png").write_bytes(b"\x89PNG")
    result = run_script(SCRIPTS[0], run_dir, "--num-tasks", "1", "--seed", "7", "--overwrite")
    assert result.returncode == 0, result.stderr[-2000:]
    with open(run_dir / "config.json") as f:
        assert json.load(f)["args"]["seed"] == 7
    assert not set(old_events) & set(os.listdir(run_dir))
    assert evaluation_rows(run_dir) == [(0, 0), (128, 0), (256, 0)]  # the new run's rows only
    assert (run_dir / "notes.txt").read_text() == "what I tried\n"
    assert (run_dir / "evaluations.csv.orig").read_text() == "a copy the user kept\n"
    assert (run_dir / "analysis" / "plot.png").read_bytes() == b"\x89PNG"


@TEMPLATE_ONLY
def test_sigint_stops_with_a_checkpoint_and_exit_75_and_the_rerun_ends_as_a_straight_run(finished_run, tmp_path):
    """Ctrl-C (SIGINT) is handled as SIGTERM: a checkpoint at the next update's end, exit 75; the same command
    resumes and ends bit for bit where the straight run (finished_run) ended."""
    script, straight = finished_run
    run_dir = tmp_path / "run"
    stopped = run_until_checkpoint_then_stop(script, run_dir, run_dir / "checkpoint.pt", stop_signal=signal.SIGINT)
    assert stopped.returncode == 75, (stopped.stdout[-2000:], stopped.stderr[-2000:])
    assert f"received signal {int(signal.SIGINT)}" in stopped.stdout + stopped.stderr
    assert "Traceback" not in stopped.stderr and "KeyboardInterrupt" not in stopped.stderr
    assert not (run_dir / "summary.json").exists()
    assert 0 < load_checkpoint_file(run_dir / "checkpoint.pt")["global_step"] < 512
    resumed = run_script(script, run_dir)
    assert resumed.returncode == 0 and "resum" in resumed.stdout.lower(), resumed.stderr[-2000:]
    assert_same_run_state(straight, run_dir)


def test_a_second_process_on_a_run_directory_is_refused(tmp_path):
    """One writer per run directory: while a run holds its directory, the same command, with or without
    --overwrite, exits 2 at once naming the holder's PID and host and changes nothing; the first run's outputs are
    those of a run alone."""
    import socket

    script, solo_dir, run_dir = SCRIPTS[0], tmp_path / "solo", tmp_path / "run"
    assert run_script(script, solo_dir).returncode == 0
    first = start_stopped_at_task_change(script, run_dir)  # held mid-run, so that the second process surely meets it
    assert (run_dir / "evaluations.csv").exists()
    for extra in ((), ("--overwrite",)):
        second = run_script(script, run_dir, *extra, timeout=120)
        assert second.returncode == 2, second.stderr[-2000:]
        assert f"in use by PID {first.pid} on host {socket.gethostname()}" in second.stderr
        assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
    first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()[-3000:]
    for name in ("evaluations.csv", "plasticity.csv"):
        assert (run_dir / name).read_bytes() == (solo_dir / name).read_bytes()


def test_a_killed_run_frees_its_lock_and_resumes_to_the_state_of_a_straight_run(tmp_path):
    """SIGKILL (nothing saved on the way out) at the first step of task 1, inside a rollout of a slippery run
    whose tasks change and end mid-rollout: the lock goes with the process (an OS lock, no file to clean), and the
    same command resumes from the last checkpoint (step 128), drops the rows logged after it (the evaluation and
    plasticity rows at step 160), crosses the task change again and ends in the straight run's state, bit for bit
    (tiny_run.run_state: logs, summary, every entry of the final checkpoint)."""
    flags = ("--experiment", "slippery", "--strategy", "decreasing", *MID_ROLLOUT_FLAGS,
             "--checkpoint-frequency", "128")
    straight, run_dir = tmp_path / "straight", tmp_path / "run"
    result = run_script(SCRIPTS[0], straight, *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_ends_exactly_at(straight, MID_ROLLOUT_EVALUATION_STEPS, MID_ROLLOUT_STEPS_PER_TASK)
    assert load_checkpoint_file(straight / "checkpoint.pt")["env_states"][0]["setting"]["experiment"] == "slippery"

    killed = run_signalled_at_task_change(SCRIPTS[0], run_dir, signal.SIGKILL, *flags)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (run_dir / ".lock").exists() and not (run_dir / "summary.json").exists()
    assert load_checkpoint_file(run_dir / "checkpoint.pt")["global_step"] == 128
    assert evaluation_rows(run_dir)[-1] == (MID_ROLLOUT_STEPS_PER_TASK, 0)  # logged after the checkpoint
    assert int(read_csv(run_dir / "plasticity.csv")[-1]["global_step"]) == MID_ROLLOUT_STEPS_PER_TASK
    resumed = run_script(SCRIPTS[0], run_dir, *flags)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming {run_dir} from global_step 128" in resumed.stdout
    assert_same_run_state(straight, run_dir)


def test_the_previous_defaults_resume_bit_for_bit_with_two_envs(tmp_path):
    """At v0.1's defaults (golden_outputs.V01_FLAGS: observation and reward normalization,
    log std 0), with two envs per seed and tasks that change and end mid-rollout: SIGTERM at the first step of
    task 1 stops the run at the next update's end (step 256) with exit 75, and the resumed run, which stops exactly
    at 320 inside its rollout, ends in the straight run's state bit for bit (tiny_run.run_state: the observation and
    return statistics, both envs' discounted returns and simulations, the optimizers, ...)."""
    flags = (*golden_outputs.V01_FLAGS, *MID_ROLLOUT_FLAGS, "--num-envs", "2", "--num-steps", "64",
             "--checkpoint-frequency", "128")  # rollouts of 64 steps of 2 envs: 128 global steps, as the tiny flags'
    straight, run_dir = tmp_path / "straight", tmp_path / "run"
    result = run_script(SCRIPTS[0], straight, *flags)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_ends_exactly_at(straight, MID_ROLLOUT_EVALUATION_STEPS, MID_ROLLOUT_STEPS_PER_TASK, num_envs=2)
    final = load_checkpoint_file(straight / "checkpoint.pt")
    # both envs' returns and observations in the statistics: 2 per step (and the 2 first observations)
    assert final["discounted_return"].shape == (1, 2) and final["args"]["norm_obs"] and final["args"]["norm_reward"]
    assert final["return_rms"]["count"] == pytest.approx(1e-4 + 320)
    assert final["obs_rms"]["count"] == pytest.approx(1e-4 + 322)

    stopped = run_signalled_at_task_change(SCRIPTS[0], run_dir, signal.SIGTERM, *flags)
    assert stopped.returncode == 75, (stopped.stdout[-2000:], stopped.stderr[-2000:])
    assert load_checkpoint_file(run_dir / "checkpoint.pt")["global_step"] == 256
    resumed = run_script(SCRIPTS[0], run_dir, *flags)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resuming {run_dir} from global_step 256" in resumed.stdout
    assert_same_run_state(straight, run_dir)


def test_unwritable_run_dir_fails_at_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run_script(SCRIPTS[0], blocker / "run", timeout=120)
    assert result.returncode == 2 and "not writable" in result.stderr


# The injection wraps the plumbing's optimizer_step, the one door every method's losses pass through: in the first
# BAD_STEPS calls the losses keep their values but carry a NaN gradient for the seed indices BAD_SEEDS (every seed
# when None), so each parameter of those seeds gets a NaN gradient whatever the loss is made of (which torch
# functions the method calls, how many optimizers it has).
NONFINITE_PATCH = """
import torch

class NanGradientForSeeds(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss):
        return loss.clone()

    @staticmethod
    def backward(ctx, grad):
        poisoned = grad.clone()
        poisoned[slice(None) if BAD_SEEDS is None else BAD_SEEDS] = float("nan")
        return poisoned

calls = [0]
original_optimizer_step = namespace["optimizer_step"]
def optimizer_step_with_nan_gradients(run, losses, *rest, **options):
    calls[0] += 1
    if calls[0] <= BAD_STEPS:
        losses = {name: NanGradientForSeeds.apply(loss) for name, loss in losses.items()}
    return original_optimizer_step(run, losses, *rest, **options)
namespace["optimizer_step"] = optimizer_step_with_nan_gradients
"""


def run_with_nonfinite_gradients(script, run_dir, bad_steps, *flags, bad_seeds=None, method_patch=""):
    """The tiny run of ``script`` plus ``flags``, its first ``bad_steps`` optimizer steps given NaN gradients for
    the seed indices ``bad_seeds`` (every seed when None); ``method_patch``: a stand-in method's patch, run first."""
    patch = f"BAD_STEPS, BAD_SEEDS = {bad_steps!r}, {bad_seeds!r}\n{method_patch}\n{NONFINITE_PATCH}"
    return run_patched(script, run_dir, patch, *flags)


def assert_nonfinite_skips(result, run_dir, skipped) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"skipped {skipped} minibatch step(s) with non-finite" in result.stderr
    with open(run_dir / "summary.json") as f:
        assert json.load(f)["nonfinite_skips"] == skipped


@pytest.mark.parametrize("script", SCRIPTS)
def test_nonfinite_gradients_are_skipped_and_counted(script, tmp_path):
    """NaN gradients in the first 2 optimizer steps (every optimizer of the step): both steps skipped, counted."""
    result = run_with_nonfinite_gradients(script, tmp_path / "run", 2, "--num-tasks", "1")
    assert_nonfinite_skips(result, tmp_path / "run", 2)


# A stand-in method whose actor loss calls Tensor.norm() once per actor parameter (an L2-Init-like penalty of weight
# 0, so the training is PPO's; until 2026-11-29 the injection counted torch.linalg.vector_norm's calls, which
# Tensor.norm() makes too). At exit it says how many minibatches' losses had the penalty.
NORM_PENALTY_PATCH = """
import atexit, sys
penalized = [0]
atexit.register(lambda: print(f"norm penalty in {penalized[0]} minibatch losses", file=sys.stderr))
original_ppo_loss = namespace["ppo_loss"]
def ppo_loss_with_a_norm_penalty(agent, mb, args):
    losses, stats = original_ppo_loss(agent, mb, args)
    penalty = sum((p - p.detach()).norm() ** 2 for p in agent.actor.parameters())
    penalized[0] += 1
    return {**losses, "actor": losses["actor"] + 0.0 * penalty}, stats
namespace["ppo_loss"] = ppo_loss_with_a_norm_penalty
"""


def test_a_loss_calling_tensor_norm_passes_the_nonfinite_test(tmp_path):
    result = run_with_nonfinite_gradients(SCRIPTS[0], tmp_path / "run", 2, "--num-tasks", "1",
                                          method_patch=NORM_PENALTY_PATCH)
    assert_nonfinite_skips(result, tmp_path / "run", 2)
    # one task of 256 steps: one update (none after the last rollout) of 2 epochs x 2 minibatches of 64
    assert "norm penalty in 4 minibatch losses" in result.stderr


def test_a_nonfinite_seed_skips_its_own_steps_only(tmp_path):
    """NaN gradients for seed 1 (index 0) in the first two optimizer steps: seed 1 skips them, while seed 2 trains
    exactly as it does alone."""
    flags = ["--num-tasks", "1", "--num-seeds", "2"]
    result = run_with_nonfinite_gradients(SCRIPTS[0], tmp_path / "run" / "seed{seed}", 2, *flags, bad_seeds=[0])
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "run" / "seed1" / "summary.json") as a, open(tmp_path / "run" / "seed2" / "summary.json") as b:
        assert json.load(a)["nonfinite_skips"] == 2 and json.load(b)["nonfinite_skips"] == 0
    alone = run_script(SCRIPTS[0], tmp_path / "alone" / "seed{seed}", "--num-tasks", "1", "--seed", "2")
    assert alone.returncode == 0, alone.stderr[-3000:]
    assert_same_run_state(tmp_path / "run" / "seed2", tmp_path / "alone" / "seed2")
    with (open(tmp_path / "run" / "seed1" / "evaluations.csv") as a,
          open(tmp_path / "run" / "seed2" / "evaluations.csv") as b):
        assert a.read() != b.read()


@pytest.mark.parametrize("script", SCRIPTS)
def test_persistent_nonfinite_gradients_stop_with_a_checkpoint(script, tmp_path):
    """Every script's update ends by its one return when a seed has skipped --max-nonfinite-skips steps in a row
    (minibatches yields no more), and the run stops (exit 3) with a checkpoint of the last finite state."""
    result = run_with_nonfinite_gradients(script, tmp_path / "run", 10**9, "--max-nonfinite-skips", "5",
                                          *method_event_flags(script))
    assert result.returncode == 3, result.stderr[-3000:]
    assert "5 consecutive minibatch steps had a non-finite" in result.stderr
    assert not (tmp_path / "run" / "summary.json").exists()
    stopped = load_checkpoint_file(tmp_path / "run" / "checkpoint.pt")
    # A run that ends before its first update saves the initial networks of the same seed: every step was
    # skipped, so the stopped run's networks must be exactly those (the last finite state).
    untrained = run_script(script, tmp_path / "untrained", "--num-tasks", "1", "--steps-per-task", "128",
                           *method_event_flags(script))
    assert untrained.returncode == 0, untrained.stderr[-2000:]
    initial = load_checkpoint_file(tmp_path / "untrained" / "checkpoint.pt")
    for network in ("actor", "critic"):
        for name, tensor in initial[network].items():
            assert torch.equal(tensor, stopped[network][name])


def run_evaluate(run_dir, *flags, env=None) -> subprocess.CompletedProcess:
    """scripts/evaluate.py on ``run_dir`` with ``flags`` (``env``: extra environment variables)."""
    return run_command([sys.executable, os.path.join(REPO_ROOT, "scripts", "evaluate.py"), str(run_dir), *flags],
                       REPO_ROOT, env, timeout=120)


def test_saved_policy_reproduces_the_last_evaluation(finished_run):
    """scripts/evaluate.py with the final checkpoint gives exactly the run's last evaluation (same task, seeds)."""
    script, run_dir = finished_run
    result = run_evaluate(run_dir, "--task", "1", "--episodes", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    evaluation = json.loads(result.stdout)
    last_row = read_csv(run_dir / "evaluations.csv")[-1]
    assert evaluation["global_step"] == int(last_row["global_step"]) == 512
    assert evaluation["return_mean"] == pytest.approx(float(last_row["return_mean"]), rel=1e-12)


@TEMPLATE_ONLY
def test_evaluate_refuses_a_task_the_run_does_not_have(finished_run):
    bad = run_evaluate(finished_run[1], "--task", "5")
    assert bad.returncode == 2 and "--task must be in [0, 1]" in bad.stderr


def test_saved_policy_reproduces_the_last_evaluation_whatever_the_callers_threads(tmp_path):
    """evaluate.py runs with the run's --torch-threads, not the caller's: with 10 episodes a 2-thread matmul rounds
    differently from the run's 1-thread one (PPO, task 1: -0.23764721734402872 against -0.23764720812679457 when
    evaluate.py used the default threads), so the return must match the run's last row exactly under 2 threads."""
    run_dir = tmp_path / "run"
    result = run_script(SCRIPTS[0], run_dir, "--eval-episodes", "10")
    assert result.returncode == 0, result.stderr[-2000:]
    evaluated = run_evaluate(run_dir, "--task", "1", "--episodes", "10", env={"OMP_NUM_THREADS": "2"})
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    last_row = read_csv(run_dir / "evaluations.csv")[-1]
    assert json.loads(evaluated.stdout)["return_mean"] == float(last_row["return_mean"])


def test_a_crash_before_the_first_checkpoint_restarts_from_scratch(tmp_path):
    """Outputs of an attempt that died before writing a checkpoint are discarded, not appended to."""
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    (crashed / "evaluations.csv").write_text("global_step,task,episodes,return_mean,return_std,return_min,return_max\n"
                                             "0,0,2,123.0,0.0,123.0,123.0\n")
    result = run_script(SCRIPTS[0], crashed)
    assert result.returncode == 0, result.stderr[-2000:]
    assert evaluation_rows(crashed) == TINY_EVALUATION_STEPS
    assert "123.0" not in (crashed / "evaluations.csv").read_text()


def test_parse_errors_are_one_line_and_help_survives_a_closed_pipe(tmp_path):
    """tyro's boxed errors become one line naming the flag (another script's flag too: tyro's "Unrecognized"); `--help`
    into a closed pipe (`| head`) ends without a traceback, by SIGPIPE as command-line tools do."""
    for flags, expected in ((["--steps-per-task", "abc"], "--steps-per-task"),
                            (["--kappa", "0.1"], "Unrecognized options: --kappa"),
                            (["--env-id", "Walker2d-v5"], "Ant-v5")):
        result = run_script("ppo_continuous.py", tmp_path / "run", *flags, timeout=120)
        assert result.returncode == 2 and expected in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before anything is written
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "ppo_continuous.py"), "--help"], stdout=write_end,
                            stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write_end)
    assert result.returncode in (0, -signal.SIGPIPE) and result.stderr == "", result.stderr


@pytest.mark.every_script  # conftest's --script keeps it
def test_every_script_gives_the_plumbing_the_same_method_signatures():
    """The contract of the marker comment, checked here once for every script (the plumbing does not check it at
    run time): every script defines the functions the plumbing and main call, with the template's parameters (a
    method changes what they do, not how they are called), its Args has the fields the plumbing reads and its Agent
    the fields the plumbing uses."""
    import importlib
    import inspect

    from reference_math import new_agent, tiny_args

    template = importlib.import_module("ppo_continuous")
    # main's phases and the hooks the plumbing calls are in the contract (whatever else it may come to hold)
    assert {"make_agent", "rollout_policy", "evaluation_action", "training_reward", "compute_advantages", "update",
            "log_update", "set_learning_rate", "main"} <= set(template.METHOD_FUNCTIONS)
    for script in SCRIPTS:
        module = importlib.import_module(script[: -len(".py")])
        for name in template.METHOD_FUNCTIONS:
            assert list(inspect.signature(getattr(module, name)).parameters) == \
                list(inspect.signature(getattr(template, name)).parameters), (script, name)
        assert set(template.METHOD_ARGS) <= {field.name for field in dataclasses.fields(module.Args)}, script
        assert set(template.AGENT_FIELDS) <= set(vars(new_agent(module, tiny_args(module, num_envs=1)))), script


def help_fields(help_text: str) -> dict:
    """The options box of a script's --help as {flag: its text's rendered lines}, and the text column's width."""
    lines = [line[2:-2] for line in help_text.splitlines() if line.startswith("│ ") and line.endswith(" │")]
    # tyro puts each flag's text beside its names, or below them when the names are long on average (EPPO's)
    column = next(max(line.find("show this help"), below.find("show this help"))
                  for line, below in zip(lines, lines[1:]) if line.startswith("-h, --help"))
    fields, flag = {}, None
    for line in lines:
        text = line[column:]
        if line.startswith("-"):  # a flag's first line: its names, then its text's first line when they fit before it
            flag = line.split()[0].rstrip(",")
            fields[flag], text = [], text if line[column - 2 : column] == "  " else ""
        if text.strip():
            fields[flag].append(text.rstrip())
    return fields, len(lines[0]) - column


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_flags_help_reads_as_one_paragraph(script):
    """--help wraps each flag's text where the next word would not fit, never where the docstring's source line
    ends: every rendered line but a flag's last is full up to the next word (a line broken mid-phrase is not)."""
    result = run_command([sys.executable, os.path.join(REPO_ROOT, script), "--help"], REPO_ROOT, {"COLUMNS": "100"},
                         timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    fields, width = help_fields(result.stdout)
    assert len(fields) > 40 and width > 40  # the box was parsed: every flag and a text column
    for flag, rendered in fields.items():
        for line, following in zip(rendered, rendered[1:]):
            next_unit = template().help_glued(following.strip()).split(" ")[0]  # words --help keeps together
            assert len(line) + 1 + len(next_unit) > width, f"{script} {flag}: broken after {line!r}"


def template():
    import importlib

    return importlib.import_module(sync_plumbing.TEMPLATE[: -len(".py")])


HELP_WIDTHS = (80, 120)


@pytest.fixture(scope="module")
def helps() -> dict:
    """{(script, columns): its --help at that terminal width}, each script's at 80 and 120 columns."""
    texts = {}
    for script in SCRIPTS:
        for columns in HELP_WIDTHS:
            result = run_command([sys.executable, os.path.join(REPO_ROOT, script), "--help"], REPO_ROOT,
                                 {"COLUMNS": str(columns)}, timeout=120)
            assert result.returncode == 0, result.stderr[-2000:]
            texts[script, columns] = result.stdout
    return texts


def test_help_starts_with_the_scripts_own_flags_and_tells_no_history(helps):
    """Each script's first flag after -h is its own (the template's: PPO's first), every line fits the terminal
    (the description above the box is wrapped), and no --help names a release, a date, a study's path or a
    constant a user cannot look up; --cuda's text names CUDA_MIN_SEEDS's value."""
    import importlib

    template_fields = [field.name for field in dataclasses.fields(template().Args)]
    for (script, columns), text in helps.items():
        first_flag = re.search(r"-h, --help.*?\n(?:.*show this help.*\n)?.*?(--[\w-]+)", text).group(1)
        own = [field.name for field in dataclasses.fields(importlib.import_module(script[:-3]).Args)
               if script == sync_plumbing.TEMPLATE or field.name not in template_fields]
        assert first_flag == "--" + own[0].replace("_", "-"), (script, first_flag)
        assert max(len(line) for line in text.splitlines()) <= columns, script
        history = re.findall(r"v0\.\d|20\d\d-\d\d-\d\d|docs/studies|studies/|\b[A-Z]{2,}_[A-Z_]{2,}\b", text)
        assert not history, (script, history)
        assert f"--num-seeds >= {template().CUDA_MIN_SEEDS}" in " ".join(text.split()), script


def test_help_breaks_no_line_mid_expression(helps):
    """At 80 and 120 columns no flag's text breaks inside "(default: X)", around an operator or before a number
    (help_glued's rule, checked on the rendered lines: where a line ends, the words on both sides may part)."""
    for (script, columns), text in helps.items():
        for flag, rendered in help_fields(text)[0].items():
            for line, following in zip(rendered, rendered[1:]):
                junction = f"{line.split()[-1]} {following.split()[0]}"
                assert not line.endswith("(default:") and template().help_glued(junction) == junction, \
                    (script, columns, flag, line, following)


def test_a_misspelt_flag_gets_did_you_mean(tmp_path):
    """An unknown flag is refused in one line that suggests the closest real one (tyro's suggestions)."""
    typos = [(SCRIPTS[0], "--seeds", "--seed"), (SCRIPTS[0], "--no-norm-rewards", "--no-norm-reward"),
             *((script, "--learning-rat", "--learning-rate") for script in SCRIPTS)]
    for script, typo, meant in typos:
        result = run_script(script, tmp_path / "run", typo, "1", tiny=False, timeout=120)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert f"did you mean {meant}?" in result.stderr, result.stderr
