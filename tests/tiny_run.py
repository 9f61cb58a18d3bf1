"""Shared helpers for end-to-end tests: run an algorithm script for a few hundred steps in a subprocess."""

import csv
import os
import signal
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Two HalfCheetah paralysis tasks of 256 steps, two updates per task, 50-step episodes: a few seconds of CPU.
TINY_FLAGS = (
    "--env-id", "HalfCheetah-v5", "--experiment", "paralysis", "--strategy", "back-one",
    "--steps-per-task", "256", "--num-tasks", "2", "--num-steps", "128", "--minibatch-size", "64",
    "--update-epochs", "2", "--eval-frequency", "128", "--eval-episodes", "2", "--max-episode-steps", "50",
    "--no-cuda",
)
# Flags that make a method's own events happen inside the tiny runs (CB replaces units, ReDo recycles them), so that
# the shared end-to-end tests (SIGTERM + resume, seed independence, the golden outputs of two seeds) cross them. A
# method whose events are rarer than a tiny run adds its flags here (docs/reading-guide.md, "Adding a method").
METHOD_EVENT_FLAGS = {"cb_continuous.py": ["--maturity-threshold", "2", "--replacement-rate", "0.05"],
                      "ppo_redo_continuous.py": ["--redo-frequency", "2"],
                      "ppo_snp_continuous.py": ["--snp-frequency", "2", "--snp-shrink", "0.9", "--snp-perturb", "0.1"]}
# The two-seed run of every script (tests/test_all_scripts.py's test_two_seed_run_...: the golden outputs of two
# seeds, seed independence and SIGTERM + resume are checked on one run of these flags, so each is paid for once):
# seeds 1 and 2 in one process; an odd evaluation count (3) and minibatch (32) put a seed's slices of stacked tensors
# at misaligned offsets; a checkpoint every 128 steps; every 4th training observation saved (--save-states).
def two_seed_flags(script: str) -> list:
    return ["--num-seeds", "2", "--eval-episodes", "3", "--minibatch-size", "32", "--checkpoint-frequency", "128",
            "--save-states", "--save-states-every", "4", *METHOD_EVENT_FLAGS.get(script, [])]


# evaluation_steps(256, 2, 128): step 0, every 128 steps, task ends at 256 and 512; the task column is the
# task that was just trained on.
TINY_EVALUATION_STEPS = [(0, 0), (128, 0), (256, 0), (384, 1), (512, 1)]


def run_script(script: str, run_dir, *extra_flags, tiny: bool = True, timeout: float = 300, env=None,
               repo_root=REPO_ROOT):
    """Run ``script`` (a file name at the repository root) with the tiny flags plus ``extra_flags``.

    ``repo_root``: another copy of the repository to run it from (the golden tests' reference commit); the script
    and its working directory are that copy's, so its imports (nonstationary_envs, ...) are that copy's too."""
    command = [sys.executable, os.path.join(str(repo_root), script), "--run-dir", str(run_dir)]
    command += list(TINY_FLAGS if tiny else ()) + [str(flag) for flag in extra_flags]
    return subprocess.run(command, cwd=str(repo_root), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


# A script run with changes made at run time, not in its text: the script's file runs as a module without its main
# guard, the patch (Python code) edits its functions in `namespace` (the module's globals, which its functions
# read), then main is called as the guard calls it.
PATCHED_RUN = """
import runpy, sys
script, sys.argv = sys.argv[1], sys.argv[1:]
namespace = runpy.run_path(script, run_name="patched_script")["main"].__globals__
exec(sys.argv.pop(1), {"namespace": namespace})
sys.exit(namespace["main"](sys.argv[1:]))
"""


def run_patched(script: str, run_dir, patch: str, *extra_flags, timeout: float = 300) -> subprocess.CompletedProcess:
    """run_script's tiny run of ``script`` with ``patch`` applied to the script's namespace first (PATCHED_RUN)."""
    command = [sys.executable, "-c", PATCHED_RUN, os.path.join(REPO_ROOT, script), patch, "--run-dir", str(run_dir),
               *TINY_FLAGS, *[str(flag) for flag in extra_flags]]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def load_checkpoint_file(path) -> dict:
    """A checkpoint file as the scripts read it (read_checkpoint: torch.load with weights_only=True, the numpy
    arrays restored); an AssertionError naming the file when they would refuse it."""
    import ppo_continuous

    state, problem = ppo_continuous.read_checkpoint(str(path))
    assert state is not None, f"{path}: {problem}"
    return state


def start_script(script: str, run_dir, *extra_flags, env=None) -> subprocess.Popen:
    """Start ``script`` with the tiny flags plus ``extra_flags`` in the background (run_script's command)."""
    command = [sys.executable, os.path.join(REPO_ROOT, script), "--run-dir", str(run_dir), *TINY_FLAGS,
               *[str(flag) for flag in extra_flags]]
    return subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def wait_for(path, process: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until ``path`` exists, the process has ended, or ``timeout`` seconds have passed."""
    deadline = time.time() + timeout
    while not os.path.exists(path) and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)


def run_until_checkpoint_then_stop(script: str, run_dir, checkpoint, *extra_flags, env=None, timeout: float = 120,
                                   stop_signal=signal.SIGTERM) -> subprocess.CompletedProcess:
    """Start ``script`` with the tiny flags, send ``stop_signal`` once ``checkpoint`` (a path) exists, wait for it
    to stop (it writes a checkpoint and exits 75): the preemption that SLURM (SIGTERM) or Ctrl-C (SIGINT) causes,
    at a known point."""
    process = start_script(script, run_dir, *extra_flags, env=env)
    wait_for(checkpoint, process, timeout)
    process.send_signal(stop_signal)
    stdout, stderr = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def in_ci() -> bool:
    """Whether the CI environment variable is set (CI=true on GitHub Actions, GitLab and most others)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def cannot_run(reason: str) -> None:
    """A guard that cannot run here: skipped with its reason, except in CI (in_ci), where nothing may skip
    silently, so it fails with the same reason (.ci/run sets up what the guards need)."""
    import pytest

    if in_ci():
        pytest.fail(f"{reason} (CI is set: a guard that cannot run fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def read_csv(path) -> list:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def saved_networks(checkpoint: dict) -> list:
    """Every network and method state saved as a state dict of tensors (actor, critic, DRND predictor, ...)."""
    import torch

    return [k for k, v in checkpoint.items() if isinstance(v, dict) and v and all(isinstance(t, torch.Tensor)
                                                                                 for t in v.values())]


def assert_same_seed_outputs(dir_a, dir_b) -> None:
    """Two run directories of one seed hold byte-identical evaluations and plasticity logs (line ends included: a
    resume rewrites them), bit-identical final networks and the same initial ones (initial_parameters)."""
    for name in ("evaluations.csv", "plasticity.csv"):
        assert (dir_a / name).read_bytes() == (dir_b / name).read_bytes(), name
    import torch

    final_a = load_checkpoint_file(dir_a / "checkpoint.pt")
    final_b = load_checkpoint_file(dir_b / "checkpoint.pt")
    assert final_a["global_step"] == final_b["global_step"]
    networks = saved_networks(final_a)
    assert {"actor", "critic"} <= set(networks)
    for network in networks:
        for name, tensor in final_a[network].items():
            assert torch.equal(tensor, final_b[network][name]), f"{network}.{name} differs"
    initial_a, initial_b = final_a["initial_parameters"], final_b["initial_parameters"]
    assert {"actor", "critic"} <= set(initial_a) and initial_a.keys() == initial_b.keys()
    for network, parameters in initial_a.items():
        assert parameters.keys() == initial_b[network].keys()
        for name, tensor in parameters.items():
            assert torch.equal(tensor, initial_b[network][name]), f"initial {network}.{name} differs"


def directory_bytes(run_dir) -> dict:
    """Every file of a run directory, byte for byte, but .lock (it names the last process that held the directory)."""
    return {path.name: path.read_bytes() for path in sorted(run_dir.iterdir()) if path.is_file() and path.name != ".lock"}
