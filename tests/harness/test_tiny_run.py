"""tiny_run's preloaded interpreter (tests/preloaded_python.py) stands in for `python SCRIPT` only where nothing can
tell them apart: the same process state at the script's start and end, the same outputs bit for bit, and a fresh
interpreter wherever a run's environment changes what the preloaded modules read at import."""

import json
import signal
import subprocess
import sys

import pytest

import tiny_run
from tiny_run import REPO_ROOT, assert_same_run_state, run_script

# What a script sees of its interpreter, printed as JSON; then the ending the first argument asks for.
PROBE = """
import json, multiprocessing, os, signal, sys
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "path": sys.path[1:], "cwd": os.getcwd(), "name": __name__,
    "file": __file__, "spec": __spec__, "stdin": sys.stdin.read(), "environment": dict(os.environ),
    "dispositions": {name: str(signal.getsignal(getattr(signal, name))) for name in ("SIGINT", "SIGTERM", "SIGCHLD",
                                                                                     "SIGPIPE", "SIGUSR1")},
    "main_is_this": sys.modules["__main__"].__dict__ is globals(),
    "mp_main_is_this": sys.modules["__mp_main__"].__dict__ is globals(), "stdout_tty": sys.stdout.isatty(),
    "line_buffered": (sys.stdout.line_buffering, sys.stderr.line_buffering), "encoding": sys.stdout.encoding,
    "modules_from_tests": sorted(m for m, module in sys.modules.items()
                                 if "/tests/" in (getattr(module, "__file__", None) or "")),
}), flush=True)
print("to stderr", file=sys.stderr)
ending = sys.argv[-1]
if ending == "raise":
    raise ValueError("uncaught")
if ending == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
if ending.isdigit():
    sys.exit(int(ending))
import atexit
atexit.register(lambda: print("atexit ran"))
"""


def probe(tmp_path, ending: str, env=None) -> subprocess.CompletedProcess:
    (tmp_path / "probe_continuous.py").write_text(PROBE)
    return run_script("probe_continuous.py", tmp_path / "run", ending, tiny=False, repo_root=tmp_path, env=env)


@pytest.mark.parametrize("ending", ["normal", "3", "raise", "signal"])
def test_a_preloaded_run_is_a_fresh_interpreter_to_its_script(tmp_path, ending):
    """argv, the import path, the working directory, __main__, stdin, the environment, the signal dispositions,
    the streams, the exit code (a signal's negative), a traceback, atexit: as `python SCRIPT` gives them."""
    preloaded = probe(tmp_path, ending)
    fresh = probe(tmp_path, ending, env={"TINY_RUN_FRESH": "1"})
    assert tiny_run.PRELOADED, "the preloaded interpreter did not start"
    facts = [json.loads(result.stdout.splitlines()[0]) for result in (preloaded, fresh)]
    facts[1]["environment"].pop("TINY_RUN_FRESH")
    assert facts[0] == facts[1]
    assert facts[0]["argv"] == [str(tmp_path / "probe_continuous.py"), "--run-dir", str(tmp_path / "run"), ending]
    assert facts[0]["modules_from_tests"] == [] and facts[0]["main_is_this"] and facts[0]["mp_main_is_this"]
    assert preloaded.returncode == fresh.returncode == {"normal": 0, "3": 3, "raise": 1, "signal": -signal.SIGTERM}[
        ending]
    assert preloaded.stdout.splitlines()[1:] == fresh.stdout.splitlines()[1:]
    assert ("atexit ran" in preloaded.stdout) == (ending == "normal")
    # A traceback's last lines are the script's; above them the preloaded one has its server's frames.
    assert preloaded.stderr.splitlines()[-3:] == fresh.stderr.splitlines()[-3:]
    assert preloaded.stderr.startswith("to stderr\n") and fresh.stderr.startswith("to stderr\n")


def test_an_environment_the_imports_read_gets_a_fresh_interpreter(tmp_path):
    """OMP_NUM_THREADS, PYTHONPATH, ...: read when torch or Python starts, so such a run cannot be a fork."""
    for env, kind in (({"OMP_NUM_THREADS": "3"}, subprocess.Popen), ({"PYTHONPATH": "/"}, subprocess.Popen),
                      ({"COLUMNS": "80"}, tiny_run.PreloadedProcess)):
        process = tiny_run.start_command(
            [sys.executable, "-c", "import os; print(os.environ['" + next(iter(env)) + "'])"], REPO_ROOT, env)
        assert isinstance(process, kind) and process.communicate(timeout=120)[0] == next(iter(env.values())) + "\n"
    result = probe(tmp_path, "normal", env={"PYTHONPATH": str(tmp_path / "extra")})
    assert str(tmp_path / "extra") in json.loads(result.stdout.splitlines()[0])["path"]


def test_a_preloaded_run_times_out_as_subprocess_run_does(tmp_path):
    (tmp_path / "sleep_continuous.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_script("sleep_continuous.py", tmp_path / "run", tiny=False, repo_root=tmp_path, timeout=1)


def test_a_preloaded_run_writes_the_bytes_a_fresh_one_writes(tmp_path):
    """The template's tiny run, both ways: every file of the run dir and the checkpoint's tensors bit for bit (the
    golden tests, run preloaded, then hold the scripts to outputs recorded from fresh interpreters)."""
    preloaded = run_script("ppo_continuous.py", tmp_path / "preloaded")
    fresh = run_script("ppo_continuous.py", tmp_path / "fresh", env={"TINY_RUN_FRESH": "1"})
    assert preloaded.returncode == fresh.returncode == 0, preloaded.stderr[-2000:] + fresh.stderr[-2000:]
    assert_same_run_state(tmp_path / "preloaded", tmp_path / "fresh")
