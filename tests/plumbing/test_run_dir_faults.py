"""A run directory's faults: a write that fails (a full disk) and files that cannot be read on resume.

Each fault gets one line naming the file and what is wrong, and loses nothing. End to end on the template only (the
code is the plumbing, byte-identical in every script): one straight tiny run, one stopped by a disk that fills up at
its second checkpoint, that run resumed with the same command, and a refusal (no training) per damaged file. The
disk here is a mock (ENOSPC where it says); tests/plumbing/test_full_disk.py fills a real one (a tmpfs). Also: what
config.json records besides the flags (the release, the device), and that a run directory from before it recorded
them resumes.
"""

import contextlib
import errno
import io
import json
import os
import re
import shlex
import shutil
import sys
from unittest import mock

import numpy as np
import pytest
import torch

import ppo_continuous as ppo
from tiny_run import (REPO_ROOT, TINY_FLAGS, assert_same_run_state, directory_bytes, load_checkpoint_file,
                      run_command, run_script)

SCRIPT = "ppo_continuous.py"
FLAGS = ("--checkpoint-frequency", "128", "--save-states")  # checkpoints (and states.npz) at steps 128, 256, 384, 512

# Runs a script (argv[1:]) as `python script ...` would, on a disk that fills up while its second checkpoint is
# written: the first 4 KiB reach the file, then every write fails with ENOSPC.
ON_A_FILLING_DISK = r"""
import builtins, errno, os, runpy, sys
from unittest import mock

real_open, checkpoints = builtins.open, []


class FullDisk:
    def __init__(self, file):
        self.file = file

    def write(self, data):
        self.file.write(bytes(data[:4096]))
        self.file.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def filling_open(path, *args, **kwargs):
    file = real_open(path, *args, **kwargs)
    if str(path).endswith("checkpoint.pt.tmp"):
        checkpoints.append(path)
        if len(checkpoints) == 2:
            return FullDisk(file)
    return file


sys.argv = sys.argv[1:]
with mock.patch("builtins.open", filling_open):
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def error_lines(result) -> list:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]



def stopped_line(stopped) -> str:
    """The one line run_main prints for the RunWriteError that ``stopped`` (pytest.raises) caught, with exit 74."""
    printed = io.StringIO()
    with mock.patch.object(ppo, "main", side_effect=stopped.value), contextlib.redirect_stderr(printed):
        assert ppo.run_main([]) == ppo.EXIT_DISK_FULL
    assert printed.getvalue().count("\n") == 1, printed.getvalue()
    return printed.getvalue().rstrip("\n")


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("faults") / "straight"
    result = run_script(SCRIPT, run_dir, *FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def disk_full(tmp_path_factory):
    """The run stopped by the full disk (its directory, to resume in place), a copy of its directory as it was left
    (for the tests that damage a file) and the result."""
    base = tmp_path_factory.mktemp("faults")
    run_dir, left = base / "disk_full", base / "as_left"
    command = [sys.executable, "-c", ON_A_FILLING_DISK, os.path.join(REPO_ROOT, SCRIPT), "--run-dir", str(run_dir),
               *TINY_FLAGS, *FLAGS]
    result = run_command(command, REPO_ROOT, timeout=300)
    shutil.copytree(run_dir, left)
    return run_dir, left, result


def test_a_full_disk_stops_the_run_in_one_line_and_loses_nothing(disk_full, straight):
    """Exit 74 and one line naming the checkpoint, the free space and the command that resumes; no temporary file
    left; the step-128 checkpoint whole, the logs a prefix of the straight run's."""
    run_dir, _, result = disk_full
    assert result.returncode == ppo.EXIT_DISK_FULL == 74, result.stderr[-3000:]
    [line] = error_lines(result)
    command = shlex.join(["python", os.path.join(REPO_ROOT, SCRIPT), "--run-dir", str(run_dir), *TINY_FLAGS, *FLAGS])
    assert f"could not write {run_dir / 'checkpoint.pt'} (No space left on device; " in line
    assert "MiB free on its disk" in line and "nothing already logged was lost" in line
    assert line.endswith(f"re-run the same command to resume: {command} (exit code 74)")
    assert sorted(path.name for path in run_dir.iterdir() if not path.name.startswith("events.out.tfevents")) == [
        ".lock", "checkpoint.pt", "config.json", "evaluations.csv", "plasticity.csv", "states.npz"]  # no .tmp
    assert load_checkpoint_file(run_dir / "checkpoint.pt")["global_step"] == 128
    with np.load(run_dir / "states.npz") as saved:
        # every 10th step, up to the checkpoint that failed: states.npz is written before checkpoint.pt, so it is
        # never behind it; a resume keeps the states up to checkpoint.pt's step
        assert saved["global_steps"].max() == 250
    for name in ("evaluations.csv", "plasticity.csv"):
        logged, complete = (run_dir / name).read_bytes(), (straight / name).read_bytes()
        assert complete.startswith(logged) and logged.count(b"\n") >= 4, name  # the header and rows up to step 256


def test_after_space_is_freed_the_printed_command_resumes_bit_for_bit(disk_full, straight):
    """The command the line names resumes the run, which ends as the straight run did: byte-identical logs and
    bit-identical networks. Torn last lines that a crash in the middle of an append leaves (a row after the
    checkpoint's step that is not numbers; a partial line without its line end, here one that reads as step 25) are
    dropped like any row after the checkpoint."""
    run_dir, _, result = disk_full
    with open(run_dir / "evaluations.csv", "ab") as f:
        f.write(b"512,0,1,abc\r\n")
    with open(run_dir / "plasticity.csv", "ab") as f:
        f.write(b"25")
    command = shlex.split(error_lines(result)[0].split("to resume: ")[1].removesuffix(" (exit code 74)"))
    assert command[0] == "python"
    resumed = run_command([sys.executable, *command[1:]], REPO_ROOT, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "from global_step 128" in resumed.stdout
    assert_same_run_state(run_dir, straight)
    with np.load(run_dir / "states.npz") as resumed_states, np.load(straight / "states.npz") as straight_states:
        for name in ("observations", "global_steps"):
            assert np.array_equal(resumed_states[name], straight_states[name]), name
    assert not [path for path in run_dir.iterdir() if path.name.endswith(".tmp")]


def test_config_json_records_the_release_and_the_device(straight, monkeypatch):
    """config.json records the release (RELEASE, the generation of defaults) just before the commit, and
    the device the run trained on: "cpu" here, whatever the cuda flag says (it means "CUDA when available");
    a CUDA device with its index."""
    config = json.loads((straight / "config.json").read_text())
    assert re.fullmatch(r"v\d+\.\d+", ppo.RELEASE) and config["release"] == ppo.RELEASE
    keys = list(config)
    assert keys.index("git_commit") == keys.index("release") + 1
    assert config["device"] == "cpu"
    run = ppo.Run()
    run.args, run.seeds = ppo.Args(num_seeds=8), list(range(8))  # from CUDA_MIN_SEEDS seeds up: CUDA when available
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    for global_setting in ("set_num_threads", "use_deterministic_algorithms"):  # this test process keeps its own
        monkeypatch.setattr(torch, global_setting, lambda *args: None)
    ppo.set_up_devices(run, [])
    assert str(run.device) == "cuda:2"  # the CUDA device with its index, as config.json records it


def test_a_run_directory_from_before_release_and_device_resumes_bit_for_bit(disk_full, straight, tmp_path):
    """A run directory written before config.json recorded "release" and "device" (the run the full disk stopped
    at step 128, those keys deleted from its config.json): the same command resumes it, not refusing it as another
    configuration (only the flags are compared), and it ends as the straight run did; its config.json then records
    both keys."""
    run_dir = tmp_path / "before"
    shutil.copytree(disk_full[1], run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    for entries in (config, config["args"]):  # as the code before wrote it: neither key, at either level
        for key in ("release", "device"):
            entries.pop(key, None)
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    resumed = run_script(SCRIPT, run_dir, *FLAGS)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "from global_step 128" in resumed.stdout
    assert_same_run_state(run_dir, straight)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["release"] == ppo.RELEASE and config["device"] == "cpu"


def cut(path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def tear_third_line(path) -> None:
    """Line 3 (the step-128 row) torn after 12 bytes, as a crash in the middle of its append leaves it, and the next
    row appended after it, on the same line."""
    lines = path.read_bytes().split(b"\r\n")
    path.write_bytes(b"\r\n".join([*lines[:2], lines[2][:12] + lines[3], *lines[4:]]))


# (file, damage, what the error line says about it): each refused with exit 2, the directory unchanged
DAMAGES = {
    "config.json": (lambda path: cut(path, 200), "cannot be read: "),
    "summary.json": (lambda path: path.write_bytes(b'{"status": "fini'), "cannot be read: Unterminated string"),
    "evaluations.csv": (tear_third_line, "is not a row of 7 fields"),
    "checkpoint.pt": (lambda path: cut(path, 100_000), "cannot be resumed: it is unreadable"),
    "states.npz": (lambda path: cut(path, 100), "cannot be read (BadZipFile"),
}


@pytest.mark.parametrize("name", list(DAMAGES))
def test_a_file_that_cannot_be_read_is_named_and_the_directory_left_unchanged(name, disk_full, tmp_path):
    """A damaged config.json, summary.json, CSV row before the checkpoint's step, checkpoint or states.npz: exit 2,
    one line naming the file and what is wrong with it, every file of the directory byte for byte as it was."""
    run_dir = tmp_path / "run"
    shutil.copytree(disk_full[1], run_dir)
    damage, expected = DAMAGES[name]
    damage(run_dir / name)
    before = directory_bytes(run_dir)
    refused = run_script(SCRIPT, run_dir, *FLAGS, timeout=120)
    assert refused.returncode == 2, refused.stderr[-3000:]
    [line] = error_lines(refused)
    assert str(run_dir / name) in line and expected in line and "the run directory is unchanged" in line, line
    assert directory_bytes(run_dir) == before


# ---- The pieces, on small hand-made files ----


def test_a_failed_atomic_write_leaves_the_previous_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "summary.json"
    path.write_bytes(b"previous")

    def fill_the_disk(f):
        f.write(b"x" * 10_000)
        f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(ppo.RunWriteError) as stopped:
        ppo.atomic_write_bytes(str(path), fill_the_disk)
    assert ppo.failed_write(stopped.value.__cause__) is not None
    assert path.read_bytes() == b"previous" and sorted(os.listdir(tmp_path)) == ["summary.json"]
    line = stopped_line(stopped)
    assert line.startswith(f"error: could not write {path} (No space left on device; ")


def test_a_csv_row_that_fills_the_disk_is_not_left_torn(tmp_path, monkeypatch):
    """The disk fills in the middle of a row: the file is cut back to its last whole row and the run stops (74)."""
    path = tmp_path / "evaluations.csv"
    log = ppo.CsvLog(str(path), ["global_step", "return_mean"])
    log.write([128, 1.5])
    logged = path.read_bytes()
    real_write = os.write

    def write_half_then_fill(fd, data):
        if fd != log.fd:
            return real_write(fd, data)
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write_half_then_fill)
    with pytest.raises(ppo.RunWriteError) as stopped:
        log.write([256, 2.5])
    monkeypatch.undo()
    os.close(log.fd)
    assert ppo.failed_write(stopped.value.__cause__) is not None and logged == b"global_step,return_mean\r\n128,1.5\r\n"
    assert path.read_bytes() == logged
    assert f"could not write {path}" in stopped_line(stopped)


def test_csv_lines_kept_on_resume(tmp_path):
    """Rows up to the checkpoint's step are kept as written, their step and number of fields checked; later rows and
    a torn last line are dropped whatever they hold; a damaged row before the step names the file and the line."""
    path, header = tmp_path / "evaluations.csv", ["global_step", "task", "return_mean"]

    def kept(text: bytes, last_step: int = 256):
        path.write_bytes(text)
        return b"".join(ppo.csv_lines_to_keep(str(path), header, last_step))

    rows = b"global_step,task,return_mean\r\n0,0,-1.5\r\n128,0,nan\r\n256,0,2e3\r\n"
    assert kept(rows) == rows
    assert kept(rows + b"384,1,abc\r\n512,1") == rows
    assert kept(rows + b"38") == rows  # a torn line is dropped even where its number is below the step
    assert kept(rows, last_step=128) == rows[: rows.index(b"256")]
    assert ppo.csv_lines_to_keep(str(tmp_path / "absent.csv"), header, 256) is None
    assert kept(rows.replace(b"128,0,nan", b"128,0,n/a")) == rows.replace(b"128,0,nan", b"128,0,n/a")  # not parsed
    for damaged, problem in [(rows.replace(b"128,0,nan", b"128,0"), "line 3: '128,0' is not a row of 3 fields"),
                             (rows.replace(b"128,", b"x,"), "line 3: 'x,0,nan' is not a row of 3 fields"),
                             (rows.replace(b"task", b"tusk"), "line 1: not the header"),
                             (b"global_st", "line 1: not the header")]:
        with pytest.raises(ppo.RunConfigError, match=problem):
            kept(damaged)


def test_a_malformed_config_is_refused_unless_overwrite(tmp_path):
    """prepare_run_dir: a config.json that is not JSON, or holds no flags, is refused naming the file, the directory
    unchanged; with --overwrite the run's outputs are deleted (the run starts again), other files kept."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config_args = {**ppo.dataclasses.asdict(ppo.Args()), "run_dir": str(run_dir)}
    for config, problem in [(b'{"args": {"seed": 1,', "cannot be read: Expecting"),
                            (b'["seed"]', "cannot be read: it holds no args")]:
        (run_dir / "config.json").write_bytes(config)
        (run_dir / "evaluations.csv").write_bytes(b"global_step\r\n0\r\n")
        (run_dir / "notes.txt").write_bytes(b"mine")
        before = directory_bytes(run_dir)
        with pytest.raises(ppo.RunConfigError, match=problem) as refused:
            ppo.prepare_run_dir(ppo.Args(), str(run_dir), config_args)
        assert str(run_dir / "config.json") in str(refused.value) and directory_bytes(run_dir) == before
        ppo.prepare_run_dir(ppo.Args(overwrite=True), str(run_dir), config_args)
        assert directory_bytes(run_dir) == {"notes.txt": b"mine"}
