"""Shared helpers for end-to-end tests: run an algorithm script for a few hundred steps in a subprocess."""

import ast
import atexit
import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS_DIR)

# Two HalfCheetah paralysis tasks of 256 steps, two updates per task, 50-step episodes: a few seconds of CPU.
TINY_FLAGS = (
    "--env-id", "HalfCheetah-v5", "--experiment", "paralysis", "--strategy", "back-one",
    "--steps-per-task", "256", "--num-tasks", "2", "--num-steps", "128", "--minibatch-size", "64",
    "--update-epochs", "2", "--eval-frequency", "128", "--eval-episodes", "2", "--max-episode-steps", "50",
    "--no-cuda",
)


def method_test_file(script: str) -> str:
    """The own test file of an algorithm script, relative to tests/: x_continuous.py -> methods/test_x.py
    (ppo_continuous.py -> methods/test_ppo.py, ppo_redo_continuous.py -> methods/test_ppo_redo.py)."""
    return os.path.join("methods", f"test_{os.path.basename(script)[: -len('_continuous.py')]}.py")


# Flags that make a method's own events happen inside the tiny runs (CB replaces units, ReDo recycles them), so that
# the shared end-to-end tests (SIGTERM + resume, seed independence, the golden outputs of two seeds) cross them. A
# method whose events are rarer than a tiny run sets them in its own test file, a list of strings at its top level:
# EVENT_FLAGS = ["--redo-frequency", "2"] (docs/reading-guide.md, "Adding a method").
def method_event_flags(script: str) -> list:
    """``script``'s EVENT_FLAGS, read from the text of its own test file (method_test_file): a literal, read without
    importing the file, so that tests/golden_outputs.py's recorder and a study's same_outputs.py read the same flags
    outside pytest; [] for a script whose file sets none."""
    path = os.path.join(TESTS_DIR, method_test_file(script))
    if not os.path.exists(path):
        return []
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EVENT_FLAGS"
                                                for t in node.targets):
            flags = ast.literal_eval(node.value)
            if not (isinstance(flags, list) and all(isinstance(flag, str) for flag in flags)):
                raise ValueError(f"{path}: EVENT_FLAGS must be a list of strings, not {flags!r}")
            return flags
    return []


# The two-seed run of every script (tests/plumbing/test_all_scripts.py's test_two_seed_run_...: the golden outputs of
# two seeds, seed independence and SIGTERM + resume are checked on one run of these flags, so each is paid for once):
# seeds 1 and 2 in one process; an odd evaluation count (3) and minibatch (32) put a seed's slices of stacked tensors
# at misaligned offsets; a checkpoint every 128 steps; every 4th training observation saved (--save-states).
def two_seed_flags(script: str) -> list:
    return ["--num-seeds", "2", "--eval-episodes", "3", "--minibatch-size", "32", "--checkpoint-frequency", "128",
            "--save-states", "--save-states-every", "4", *method_event_flags(script)]


# evaluation_steps(256, 2, 128): step 0, every 128 steps, task ends at 256 and 512; the task column is the
# task that was just trained on.
TINY_EVALUATION_STEPS = [(0, 0), (128, 0), (256, 0), (384, 1), (512, 1)]
# The tiny flags' tasks, each 160 steps instead of 256 (the golden runs above keep 256): a task change and the end
# of the run inside a rollout of 128, as in the paper's runs (500,000 steps per task, rollouts of 2,048). Task 0
# ends at step 160 inside the second rollout (an evaluation and a plasticity row there, mid-rollout), task 1 at
# 320 inside the third, where the run stops exactly (that rollout is cut short, no update follows it).
MID_ROLLOUT_STEPS_PER_TASK = 160
MID_ROLLOUT_FLAGS = ("--steps-per-task", str(MID_ROLLOUT_STEPS_PER_TASK))
MID_ROLLOUT_EVALUATION_STEPS = [(0, 0), (128, 0), (160, 0), (256, 1), (320, 1)]


# The scripts' runs start in a preloaded interpreter (preloaded_python.py: torch, gymnasium, mujoco, ... imported
# once per test process, a fork per run, ~0.1 s instead of ~3 s), unless a run's environment differs from the
# server's in what those modules read at import (FRESH_ENVIRONMENT_PREFIXES), or TINY_RUN_FRESH=1 asks for a fresh
# interpreter per run (tests/harness/test_tiny_run.py holds the two kinds of run to the same bytes).
PRELOADED_MODULES = ("numpy", "torch", "torch.nn", "torch.nn.functional", "torch.optim", "torch.optim.adam",
                     "gymnasium", "mujoco", "gymnasium.envs.mujoco.half_cheetah_v5", "gymnasium.envs.mujoco.ant_v5",
                     "torch.utils.tensorboard", "tqdm", "tyro",
                     # what torch.use_deterministic_algorithms (every run's --torch-deterministic) imports: ~1.9 s
                     "torch._inductor.config")
FRESH_ENVIRONMENT_PREFIXES = ("PYTHON", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "LD_", "CUDA", "TORCH",
                              "MUJOCO", "NUMPY", "TINY_RUN_FRESH")
# set by torch itself (torch.use_deterministic_algorithms imports inductor, which sets its default cache directory):
# a test that starts a run in its own process sets it there, and it must not send every later run to a fresh interpreter
SET_BY_TORCH = ("TORCHINDUCTOR_CACHE_DIR",)


class PreloadedProcess:
    """A child of the preloaded interpreter, with what the tests use of subprocess.Popen: args, pid, returncode,
    stdout and stderr (text files, read as the child writes them), poll, wait, send_signal, kill, communicate."""

    def __init__(self, server, args, pid, folder):
        self.server, self.args, self.pid, self.folder, self.returncode = server, args, pid, folder, None
        self.stdout = open(os.path.join(folder, "stdout"))
        self.stderr = open(os.path.join(folder, "stderr"))

    def poll(self):
        self.server.read_replies(0)
        self.returncode = self.server.exits.get(self.pid)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.server.read_replies(left)
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout=None):
        self.wait(timeout)
        output = self.stdout.read(), self.stderr.read()
        self.stdout.close(), self.stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        return output

    def __del__(self):
        self.stdout.close(), self.stderr.close()


class PreloadedPython:
    """The client of one preloaded_python.py server per test process (started at its first run)."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="preloaded_python_")
        self.environment = dict(os.environ)
        with open(os.path.join(self.folder, "server.stderr"), "w+") as server_stderr:
            self.process = subprocess.Popen([sys.executable, os.path.join(TESTS_DIR, "preloaded_python.py"),
                                             ",".join(PRELOADED_MODULES)], cwd="/", stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=server_stderr, env=self.environment)
            ready = self.process.stdout.readline()
            server_stderr.seek(0)
            said = server_stderr.read()
        # Its imports must say nothing: a warning printed there would be missing from every child's stderr.
        if ready != b"ready\n" or said:
            raise RuntimeError(f"the preloaded interpreter did not start cleanly: {ready!r} {said[-2000:]}")
        self.replies, self.exits, self.runs = b"", {}, 0
        atexit.register(self.close)

    def close(self):
        """End the server (its end of input) and remove its folder; a child still running goes on."""
        self.process.stdin.close()
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def read_replies(self, timeout) -> list:
        """The replies that arrive within ``timeout`` seconds (None: at least one), exits recorded in self.exits."""
        import select

        replies = []
        while not replies:
            if b"\n" not in self.replies:
                if not select.select([self.process.stdout], [], [], timeout)[0]:
                    return replies
                chunk = os.read(self.process.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise RuntimeError(f"the preloaded interpreter ended (exit code {self.process.wait()})")
                self.replies += chunk
            while b"\n" in self.replies:
                line, self.replies = self.replies.split(b"\n", 1)
                reply = json.loads(line)
                if reply[0] == "exit":
                    self.exits[reply[1]] = reply[2]
                replies.append(reply)
        return replies

    def start(self, command, cwd, env) -> PreloadedProcess:
        self.runs += 1
        folder = os.path.join(self.folder, str(self.runs))
        os.mkdir(folder)
        for name in ("stdout", "stderr"):  # there before the child starts, for PreloadedProcess to open
            open(os.path.join(folder, name), "w").close()
        request = {"argv": command[1:], "cwd": cwd, "env": env, "stdout": os.path.join(folder, "stdout"),
                   "stderr": os.path.join(folder, "stderr")}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            started = [reply for reply in self.read_replies(None) if reply[0] == "started"]
            if started:
                return PreloadedProcess(self, command, started[0][1], folder)

    def can_run(self, env) -> bool:
        """Whether a run with environment ``env`` may start here: equal to the server's in every variable that
        the preloaded modules read at import."""
        def import_time(environment):
            return {key: value for key, value in environment.items()
                    if key.startswith(FRESH_ENVIRONMENT_PREFIXES) and key not in SET_BY_TORCH}
        return import_time(env) == import_time(self.environment)


PRELOADED = []  # this test process's PreloadedPython, once started


def start_command(command: list, cwd: str, env=None):
    """Start ``command`` (``[sys.executable, SCRIPT or -c CODE, ARGS...]``) with os.environ plus ``env``, stdout and
    stderr captured as text: in the preloaded interpreter where it can run, else as a subprocess.Popen."""
    environment, cwd = {**os.environ, **(env or {})}, str(cwd)
    if not PRELOADED and environment.get("TINY_RUN_FRESH", "") != "1":
        PRELOADED.append(PreloadedPython())
    if PRELOADED and PRELOADED[0].can_run(environment):
        return PRELOADED[0].start(command, cwd, environment)
    return subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment)


def run_command(command: list, cwd: str, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """subprocess.run(command, capture_output=True, text=True, timeout=timeout) through start_command()."""
    process = start_command(command, cwd, env)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def run_script(script: str, run_dir, *extra_flags, tiny: bool = True, timeout: float = 300, env=None,
               repo_root=REPO_ROOT):
    """Run ``script`` (a file name at the repository root) with the tiny flags plus ``extra_flags``.

    ``repo_root``: another copy of the repository to run it from (the golden tests' reference commit); the script
    and its working directory are that copy's, so its imports (nonstationary_envs, ...) are that copy's too."""
    command = [sys.executable, os.path.join(str(repo_root), script), "--run-dir", str(run_dir)]
    command += list(TINY_FLAGS if tiny else ()) + [str(flag) for flag in extra_flags]
    return run_command(command, str(repo_root), env, timeout)


# A script run with changes made at run time, not in its text: the script's file runs as a module without its main
# guard, the patch (Python code) edits its functions in `namespace` (the module's globals, which its functions
# read), then run_main is called as the guard calls it.
PATCHED_RUN = """
import runpy, sys
script, sys.argv = sys.argv[1], sys.argv[1:]
namespace = runpy.run_path(script, run_name="patched_script")["main"].__globals__
exec(sys.argv.pop(1), {"namespace": namespace})
sys.exit(namespace["run_main"](sys.argv[1:]))
"""


def patched_command(script: str, run_dir, patch: str, *extra_flags) -> list:
    """The command of run_script's tiny run of ``script`` with ``patch`` applied to the script's namespace first
    (PATCHED_RUN)."""
    return [sys.executable, "-c", PATCHED_RUN, os.path.join(REPO_ROOT, script), patch, "--run-dir", str(run_dir),
            *TINY_FLAGS, *[str(flag) for flag in extra_flags]]


def run_patched(script: str, run_dir, patch: str, *extra_flags, timeout: float = 300,
                env=None) -> subprocess.CompletedProcess:
    """Run patched_command(script, run_dir, patch, *extra_flags) to its end."""
    return run_command(patched_command(script, run_dir, patch, *extra_flags), REPO_ROOT, env, timeout)


def assert_refused_in_one_line(script: str, run_dir, flags: list, expected: str, env=None) -> None:
    """Bad input: exit 2 with one line naming ``expected``, no traceback, and nothing run (no evaluations.csv)."""
    result = run_script(script, run_dir, *flags, timeout=120, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert expected in result.stderr and "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, \
        result.stderr[-2000:]
    assert not os.path.exists(os.path.join(run_dir, "evaluations.csv"))


def load_checkpoint_file(path) -> dict:
    """A checkpoint file as the scripts read it (read_checkpoint: torch.load with weights_only=True, the numpy
    arrays restored); an AssertionError naming the file when they would refuse it."""
    import ppo_continuous

    state, problem = ppo_continuous.read_checkpoint(str(path))
    assert state is not None, f"{path}: {problem}"
    return state


# The process sends itself a signal right after the first write_checkpoint that leaves {checkpoint} on disk: the
# preemption that SLURM (SIGTERM) or Ctrl-C (SIGINT) causes, at a known point, whatever the machine's speed (a
# signal sent from outside once the file appears could come after the run has ended: on a fast machine the tiny
# run finishes in the time a poll takes to notice the file).
SIGNAL_AFTER_CHECKPOINT_PATCH = """
import os
write_checkpoint, sent = namespace["write_checkpoint"], []
def write_checkpoint_then_signal(run):
    write_checkpoint(run)
    if not sent and os.path.exists({checkpoint!r}):
        sent.append(True)
        os.kill(os.getpid(), {signum})
namespace["write_checkpoint"] = write_checkpoint_then_signal
"""


def run_until_checkpoint_then_stop(script: str, run_dir, checkpoint, *extra_flags, env=None, timeout: float = 120,
                                   stop_signal=signal.SIGTERM) -> subprocess.CompletedProcess:
    """Run ``script`` with the tiny flags plus ``extra_flags`` until ``checkpoint`` (a path) has been written, where
    it gets ``stop_signal`` (SIGNAL_AFTER_CHECKPOINT_PATCH); it writes a checkpoint at the next update's end and
    exits 75."""
    patch = SIGNAL_AFTER_CHECKPOINT_PATCH.format(checkpoint=str(checkpoint), signum=int(stop_signal))
    return run_patched(script, run_dir, patch, *extra_flags, timeout=timeout, env=env)


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


# The process sends itself a signal when its training environments switch to task 1 (the first set_task(None, 1):
# the evaluation envs are put on task 1 only by the first evaluation after it, and get no signal), i.e. at the first
# step of task 1, after the evaluation and plasticity rows of task 0's end were logged: a preemption at a known
# point of a rollout, whatever the machine's speed (a signal sent from outside could come after the run has ended).
SIGNAL_AT_TASK_CHANGE_PATCH = """
import os
import nonstationary_envs
set_task, sent = nonstationary_envs.BatchedEnv.set_task, []
def set_task_then_signal(self, sim_ids, task_index):
    set_task(self, sim_ids, task_index)
    if sim_ids is None and task_index == 1 and not sent:
        sent.append(True)
        os.kill(os.getpid(), {signum})
nonstationary_envs.BatchedEnv.set_task = set_task_then_signal
"""


def run_signalled_at_task_change(script: str, run_dir, signum: int, *extra_flags) -> subprocess.CompletedProcess:
    """Run ``script`` (tiny flags plus ``extra_flags``) until its first step of task 1, where it gets ``signum``."""
    return run_patched(script, run_dir, SIGNAL_AT_TASK_CHANGE_PATCH.replace("{signum}", str(int(signum))),
                       *extra_flags)


def start_stopped_at_task_change(script: str, run_dir, *extra_flags, timeout: float = 120):
    """Start ``script`` (tiny flags plus ``extra_flags``) in the background and return it once it has stopped
    itself (SIGSTOP) at its first step of task 1, holding its run directory mid-run; SIGCONT lets it go on."""
    patch = SIGNAL_AT_TASK_CHANGE_PATCH.replace("{signum}", str(int(signal.SIGSTOP)))
    process = start_command(patched_command(script, run_dir, patch, *extra_flags), REPO_ROOT)
    deadline = time.time() + timeout
    while process.poll() is None and time.time() < deadline:
        with contextlib.suppress(FileNotFoundError):  # it may end (and be reaped) between poll and open
            with open(f"/proc/{process.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "T":  # the state field: T, stopped by a signal
                    return process
        time.sleep(0.02)
    raise AssertionError(f"{script} did not stop itself at task 1 within {timeout} s (exit {process.poll()})")


def read_csv(path) -> list:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def directory_bytes(run_dir) -> dict:
    """Every file of a run directory, byte for byte, but .lock (it names the last process that held the directory)."""
    return {path.name: path.read_bytes() for path in sorted(run_dir.iterdir())
            if path.is_file() and path.name != ".lock"}


# ---- A run directory's whole state, to compare two runs of one command (straight and resumed, alone and in a group)

# summary.json's fields that are not the run's state: wall-clock times and speeds (two runs of one command differ in
# them), and the size of the process's seed group (a seed's run is the same alone or beside others).
SUMMARY_NOT_STATE = ("train_sps", "wall_time_s", "train_time_s", "eval_time_s", "plasticity_time_s",
                     "group_train_sps", "num_seeds")
# The checkpoint entries that are not the run's state: the command line (its run_dir, its seed group; a resume
# with another configuration is refused by config.json) and the wall-clock timers.
CHECKPOINT_NOT_STATE = ("args", "timers")


def run_state(run_dir) -> dict:
    """What a finished run directory holds that a resume must reproduce bit for bit: evaluations.csv and
    plasticity.csv byte for byte; summary.json but SUMMARY_NOT_STATE; states.npz's arrays (--save-states); every
    entry of the final checkpoint.pt but CHECKPOINT_NOT_STATE, read as a resume reads it (torch.load with
    weights_only=True): the networks, each optimizer's state (Adam's moments and step counts), the observation and
    return statistics, the discounted returns, the environments' current observations, episode returns and lengths,
    the non-finite skip count, every simulation's state (MuJoCo state, task, episode clock, its numpy generator), the
    torch generator, the method's own entries, and the counters global_step, iteration and task_index."""
    run_dir = str(run_dir)
    state = {}
    for name in ("evaluations.csv", "plasticity.csv"):
        with open(os.path.join(run_dir, name), "rb") as f:
            state[name] = f.read()
    with open(os.path.join(run_dir, "summary.json")) as f:
        state["summary.json"] = {key: value for key, value in json.load(f).items() if key not in SUMMARY_NOT_STATE}
    if os.path.exists(os.path.join(run_dir, "states.npz")):
        import numpy as np

        with np.load(os.path.join(run_dir, "states.npz")) as saved:
            state["states.npz"] = dict(saved)
    checkpoint = load_checkpoint_file(os.path.join(run_dir, "checkpoint.pt"))
    state["checkpoint.pt"] = {key: value for key, value in checkpoint.items() if key not in CHECKPOINT_NOT_STATE}
    return state


def first_difference(a, b, where: str = "") -> str:
    """Where ``a`` and ``b`` first differ ("" when bit for bit equal): containers entry by entry, tensors and arrays
    by dtype, shape and bytes (NaN equals NaN, -0.0 differs from 0.0), plain values by ==."""
    import numpy as np
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        a, b = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            return f"{where}: {a.dtype}{list(a.shape)} against {b.dtype}{list(b.shape)}"
        return "" if np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes() else f"{where} differs"
    if type(a) is not type(b):
        return f"{where}: a {type(a).__name__} against a {type(b).__name__}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{where}: keys {sorted(map(str, a))} against {sorted(map(str, b))}"
        return next((d for key in a for d in [first_difference(a[key], b[key], f"{where}[{key!r}]")] if d), "")
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: {len(a)} entries against {len(b)}"
        return next((d for i, (x, y) in enumerate(zip(a, b)) for d in [first_difference(x, y, f"{where}[{i}]")] if d),
                    "")
    if isinstance(a, bytes) and a != b:  # a CSV file: its first differing line
        lines_a, lines_b = a.splitlines(), b.splitlines()
        line = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b)) if x != y), min(len(lines_a), len(lines_b)))
        shown = [lines[line] if line < len(lines) else None for lines in (lines_a, lines_b)]
        return f"{where} line {line + 1}: {shown[0]!r} against {shown[1]!r}"
    if a == b or (a != a and b != b):  # a float NaN equals itself here
        return ""
    shown = f"{a!r} against {b!r}"
    return f"{where}: {shown}" if len(shown) < 200 else f"{where} differs"


def assert_same_run_state(dir_a, dir_b) -> None:
    """Two run directories of one seed end in the same state, bit for bit (run_state)."""
    difference = first_difference(run_state(dir_a), run_state(dir_b))
    assert not difference, f"{dir_a} and {dir_b} differ: {difference}"
