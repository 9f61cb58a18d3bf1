"""A real full disk, not a mocked one: the run's file system is a small tmpfs that a filler file fills up.

tests/plumbing/test_run_dir_faults.py makes a write fail with a mock, which raises ENOSPC where the mock says. A real
disk fails where the kernel runs out of pages, and a writer may then replace the OSError with an error of its own:
torch.save's zip writer raises RuntimeError ("unexpected pos") while it unwinds. Here every fault is the file
system's own ENOSPC: the run writes into a tmpfs mounted for the test (root only: `mount -t tmpfs`; elsewhere
tiny_run.cannot_run skips, and fails in CI), and a filler file beside the run directory takes the free space down to
a given level at a chosen moment. One run directory goes through the four writers in turn, the space freed after
each fault and the same command re-run: a checkpoint (inside torch.save), a CSV row, TensorBoard's writer and
states.npz; then the same command resumes it to the end, which equals a straight run's bit for bit. Each fault must
stop the run with exit 74 and the one documented line, leave no temporary file and lose nothing logged. The pieces
are also filled at several levels of free space in this process (torch.save at every level from 0 to its size).
"""

import contextlib
import io
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from unittest import mock

import numpy as np
import pytest

import ppo_continuous as ppo
from tiny_run import REPO_ROOT, TINY_FLAGS, assert_same_run_state, cannot_run, load_checkpoint_file

SCRIPT = "ppo_continuous.py"
# Checkpoints and states.npz at steps 128, 256, 384 and 512; an evaluation every 8 steps, so that evaluations.csv
# grows past one page of the disk (4 KiB: 5.8 KB in all) and a row has to take a new page (the row of step 360): a
# row that fits in a page the file already has is written on a full disk too.
FLAGS = ("--checkpoint-frequency", "128", "--save-states", "--eval-frequency", "8")
# The run starts with room for its first checkpoint; the filler then takes the rest away.
RUN_DISK = "110m"
MIB = 2**20


@contextlib.contextmanager
def tmpfs(size: str):
    """A tmpfs of ``size`` mounted on a new directory, unmounted (and removed) afterwards."""
    mount_point = tempfile.mkdtemp(prefix="full_disk_")
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mount_point],
                                 capture_output=True, text=True)
    except OSError as error:
        mounted = subprocess.CompletedProcess([], 1, "", str(error))
    try:
        if mounted.returncode != 0:
            cannot_run(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip() or mounted.returncode}")
        yield mount_point
    finally:
        if mounted.returncode == 0 and subprocess.run(["umount", mount_point], capture_output=True).returncode:
            subprocess.run(["umount", "-l", mount_point], capture_output=True)  # a process still holds a file there
        os.rmdir(mount_point)


def free_bytes(path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill(mount_point, leave: int) -> None:
    """Take the free space of the file system at ``mount_point`` down to ``leave`` bytes (a filler file; whole pages:
    a ``leave`` that is not a multiple of the page size is rounded down)."""
    leave -= leave % os.statvfs(mount_point).f_frsize
    size = free_bytes(mount_point) - leave
    if size > 0:
        fd = os.open(os.path.join(mount_point, f"filler{time.monotonic_ns()}"), os.O_WRONLY | os.O_CREAT)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    assert free_bytes(mount_point) == leave


def free_space(mount_point) -> None:
    """Remove the filler files: the space a full disk left the run is free again."""
    for name in os.listdir(mount_point):
        if name.startswith("filler"):
            os.remove(os.path.join(mount_point, name))


# Runs a script (its path and flags follow) as `python script ...` does, with the disk filled, by fill() above, to
# `leave` bytes free just before the `count`-th write of one writer: torch.save (a checkpoint), np.savez_compressed
# (states.npz), TensorBoard's EventFileWriter (a new events file) or a row of evaluations.csv that needs a new page
# of the disk. Only the moment is chosen: the write that then fails, and how it fails, are the file system's.
FILL_THE_DISK_AT = r"""
import os, runpy, sys
mount_point, writer, count, leave = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.argv = sys.argv[5:]
writes = []


def due() -> None:  # fill() of tests/plumbing/test_full_disk.py
    writes.append(writer)
    if len(writes) == count:
        stat = os.statvfs(mount_point)
        fd = os.open(os.path.join(mount_point, "filler"), os.O_WRONLY | os.O_CREAT)
        os.posix_fallocate(fd, 0, stat.f_bavail * stat.f_frsize - leave)
        os.close(fd)


def filling_before(function):
    def filled_then_called(*args, **kwargs):
        due()
        return function(*args, **kwargs)
    return filled_then_called


if writer == "checkpoint":
    import torch
    torch.save = filling_before(torch.save)
elif writer == "states":
    import numpy as np
    np.savez_compressed = filling_before(np.savez_compressed)
elif writer == "tensorboard":
    from tensorboard.summary.writer import event_file_writer
    event_file_writer.EventFileWriter.__init__ = filling_before(event_file_writer.EventFileWriter.__init__)
elif writer == "csv":
    page, os_write = os.statvfs(mount_point).f_frsize, os.write

    def write(fd, data):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        size = os.fstat(fd).st_size if path.endswith("evaluations.csv") else None
        if size is not None and size + len(data) > -(-size // page) * page:  # past the file's last page
            due()
        return os_write(fd, data)

    os.write = write
else:
    raise SystemExit(f"unknown writer {writer}")
runpy.run_path(sys.argv[0], run_name="__main__")
"""

# The run directory's way through a full disk, in order, each from the directory the stage before left, after the
# space was freed: (stage, writer, count, free bytes left, the file the line names, checkpoint.pt's step after it).
#   checkpoint: the second checkpoint (step 256) on a disk with 1 MiB left: torch.save runs out of space inside its
#     zip writer (the RuntimeError that replaced the OSError, the case of the report);
#   csv: the resumed run (from 128) passes step 256's checkpoint, then the row of step 360, the first that needs a
#     new page, finds none: part of it fits in the page the file has, the rest fails;
#   tensorboard: the resumed run (from 256) opens a new events file on a full disk; its writer thread fails;
#   states: the resumed run's states.npz at step 384 (written before the checkpoint of that step).
STAGES = [("checkpoint", "checkpoint", 2, MIB, "checkpoint.pt", 128),
          ("csv", "csv", 1, 0, "evaluations.csv", 256),
          ("tensorboard", "tensorboard", 1, 0, "events.out.tfevents.*", 256),
          ("states", "states", 1, 0, "states.npz", 256)]


def command(run_dir) -> list:
    return [os.path.join(REPO_ROOT, SCRIPT), "--run-dir", str(run_dir), *TINY_FLAGS, *FLAGS]



def stopped_line(stopped) -> str:
    """The one line run_main prints for the RunWriteError that ``stopped`` (pytest.raises) caught, with exit 74."""
    printed = io.StringIO()
    with mock.patch.object(ppo, "main", side_effect=stopped.value), contextlib.redirect_stderr(printed):
        assert ppo.run_main([]) == ppo.EXIT_DISK_FULL
    assert printed.getvalue().count("\n") == 1, printed.getvalue()
    return printed.getvalue().rstrip("\n")


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
    """The run of the same command on a disk with room, started at once: it runs beside full_disk's stages."""
    base = tmp_path_factory.mktemp("full_disk")
    with open(base / "straight.log", "w") as log:
        process = subprocess.Popen([sys.executable, *command(base / "straight")], cwd=REPO_ROOT, stdout=log,
                                   stderr=subprocess.STDOUT)
    yield base / "straight", process
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def straight(straight_run):
    run_dir, process = straight_run
    assert process.wait(timeout=300) == 0, (run_dir.parent / "straight.log").read_text()[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory, straight_run):
    """The stages run one after another on one run directory on a 110 MiB tmpfs: {stage: (result, a copy of the
    directory as the stage left it, seconds)}, and "resumed": the same command run once more with the space free."""
    copies = tmp_path_factory.mktemp("full_disk_copies")
    stages = {}
    with tmpfs(RUN_DISK) as mount_point:
        run_dir = os.path.join(mount_point, "run")
        for stage, writer, count, leave, _, _ in STAGES:
            free_space(mount_point)
            start = time.perf_counter()
            result = subprocess.run([sys.executable, "-c", FILL_THE_DISK_AT, mount_point, writer, str(count),
                                     str(leave), *command(run_dir)], cwd=REPO_ROOT, capture_output=True, text=True,
                                    timeout=300)
            seconds = time.perf_counter() - start
            if os.path.isdir(run_dir):
                shutil.copytree(run_dir, copies / stage)
            stages[stage] = (result, copies / stage, seconds)
        free_space(mount_point)
        printed = error_lines(stages["states"][0])
        resume = shlex.split(printed[0].split("to resume: ")[1].removesuffix(" (exit code 74)")) if printed else [
            "python", *command(run_dir)]
        start = time.perf_counter()
        result = subprocess.run([sys.executable, *resume[1:]], cwd=REPO_ROOT, capture_output=True, text=True,
                                timeout=300)
        seconds = time.perf_counter() - start
        shutil.copytree(run_dir, copies / "resumed")
        stages["resumed"] = (result, copies / "resumed", seconds)
        stages["run_dir"], stages["page"] = run_dir, os.statvfs(mount_point).f_frsize
    return stages


def error_lines(result) -> list:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


def saved_steps(run_dir) -> np.ndarray:
    with np.load(os.path.join(run_dir, "states.npz")) as saved:
        return saved["global_steps"]


@pytest.mark.parametrize("stage, writer, count, leave, name, checkpoint_step", STAGES, ids=[s[0] for s in STAGES])
def test_a_real_full_disk_stops_the_run_in_one_line_and_loses_nothing(stage, writer, count, leave, name,
                                                                      checkpoint_step, full_disk, straight):
    """Exit 74 and the one line (the file, the free space, the command that resumes), no traceback (neither the
    main thread's nor TensorBoard's writer thread's), no temporary file left; the CSVs a prefix of the straight
    run's, each ending with a whole row; checkpoint.pt loads, at the step before the fault; states.npz holds every
    state the straight run saved up to that step (it may hold later ones, which a resume drops)."""
    result, left, _ = full_disk[stage]
    run_dir = full_disk["run_dir"]
    assert "Traceback" not in result.stderr and "Exception in thread" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == ppo.EXIT_DISK_FULL == 74, result.stderr[-3000:]
    [line] = error_lines(result)
    named = [os.path.join(directory, name) for directory in (run_dir, os.path.realpath(run_dir))]
    assert any(line.startswith(f"error: could not write {path} (No space left on device; ") for path in named), line
    assert "MiB free on its disk" in line and "nothing already logged was lost" in line
    assert line.endswith(f"re-run the same command to resume: {shlex.join(['python', *command(run_dir)])} "
                         f"(exit code 74)"), line
    assert not [path.name for path in left.iterdir() if path.name.endswith(".tmp")]
    for log in ("evaluations.csv", "plasticity.csv"):
        logged, complete = (left / log).read_bytes(), (straight / log).read_bytes()
        assert complete.startswith(logged) and logged.endswith(b"\r\n"), log
    assert load_checkpoint_file(left / "checkpoint.pt")["global_step"] == checkpoint_step
    straight_steps = saved_steps(straight)
    assert set(straight_steps[straight_steps <= checkpoint_step]) <= set(saved_steps(left))
    if stage == "csv":  # the fault struck the first row that needed a new page: every row before it is there
        lines, logged = (straight / "evaluations.csv").read_bytes().splitlines(keepends=True), b""
        while len(logged + lines[0]) <= full_disk["page"]:
            logged += lines.pop(0)
        assert (left / "evaluations.csv").read_bytes() == logged


def test_after_the_faults_the_same_command_resumes_bit_for_bit(full_disk, straight):
    """With the space freed, the command the last line names finishes the run, which ends as the straight run
    did: byte-identical logs, the same states.npz, every entry of the final checkpoint bit for bit."""
    result, resumed, _ = full_disk["resumed"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_run_state(resumed, straight)
    assert np.array_equal(saved_steps(resumed), saved_steps(straight))
    assert "from global_step 256" in result.stdout
    assert not [path.name for path in resumed.iterdir() if path.name.endswith(".tmp")]


# ---- The pieces, in this process, at several levels of free space


@pytest.fixture()
def small_disk():
    with tmpfs("8m") as mount_point:
        yield mount_point


def test_torch_save_on_a_full_disk_at_every_level_of_free_space(small_disk, straight, monkeypatch):
    """save_checkpoint of a real checkpoint (2.3 MB) over a previous one, with 0 bytes to the checkpoint's size free
    in steps of 1/64 of it: every level short of the size stops with exit 74 and one line naming checkpoint.pt, the
    previous checkpoint.pt as it was and no temporary file left; the levels include both ways torch.save fails, the
    RuntimeError of its zip writer (most) and the OSError itself; with room enough the checkpoint is replaced."""
    run_dir = os.path.join(small_disk, "run")
    os.mkdir(run_dir)
    state = load_checkpoint_file(straight / "checkpoint.pt")
    ppo.save_checkpoint(run_dir, state)
    previous = open(os.path.join(run_dir, "checkpoint.pt"), "rb").read()
    size = len(previous)
    failures = []

    def recorded(error):
        failures.append(type(error))
        return failed_write(error)

    failed_write = ppo.failed_write
    monkeypatch.setattr(ppo, "failed_write", recorded)
    state["global_step"] += 1
    short = (size - 1) // 4096 * 4096  # a page short of the checkpoint's size
    for leave in sorted({*range(0, short, -(-size // 64) // 4096 * 4096), short}):
        fill(small_disk, leave)
        with pytest.raises(ppo.RunWriteError) as stopped:
            ppo.save_checkpoint(run_dir, state)
        free_space(small_disk)
        assert ppo.failed_write(stopped.value.__cause__) is not None, leave
        line = stopped_line(stopped)
        assert line.startswith(f"error: could not write {os.path.join(run_dir, 'checkpoint.pt')} (No space left "
                               f"on device; "), (leave, line)
        assert sorted(os.listdir(run_dir)) == ["checkpoint.pt"], leave
        assert open(os.path.join(run_dir, "checkpoint.pt"), "rb").read() == previous, leave
    assert RuntimeError in failures and OSError in failures, failures
    fill(small_disk, size + 64 * 1024)
    ppo.save_checkpoint(run_dir, state)
    assert sorted(os.listdir(run_dir)) == ["checkpoint.prev.pt", "checkpoint.pt"]
    assert load_checkpoint_file(os.path.join(run_dir, "checkpoint.pt"))["global_step"] == state["global_step"]


def test_a_runtime_error_is_a_failed_write_only_when_a_failed_write_caused_it(tmp_path):
    """failed_write: an OSError, or a RuntimeError raised while unwinding from an OSError of a failed write (ENOSPC,
    EDQUOT, EFBIG, EIO). Any other RuntimeError (of its own, or from another OSError) is raised by
    atomic_write_bytes as it is, the temporary file removed and the file as it was."""
    import errno

    def raised(error, while_handling=None):
        try:
            try:
                if while_handling is not None:
                    raise while_handling
            finally:
                raise error
        except BaseException as caught:
            return caught

    no_space = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert ppo.failed_write(no_space) is no_space
    assert ppo.failed_write(raised(RuntimeError("unexpected pos"), no_space)).errno == errno.ENOSPC
    assert ppo.failed_write(raised(RuntimeError("x"), OSError(errno.ENOENT, "gone"))) is None
    assert ppo.failed_write(RuntimeError("a bug")) is None and ppo.failed_write(ValueError("x")) is None
    path = tmp_path / "summary.json"
    path.write_bytes(b"previous")

    def a_bug(f):
        f.write(b"partial")
        raise RuntimeError("a bug, not a full disk")

    with pytest.raises(RuntimeError, match="a bug, not a full disk"):
        ppo.atomic_write_bytes(str(path), a_bug)
    assert sorted(os.listdir(tmp_path)) == ["summary.json"] and path.read_bytes() == b"previous"


def test_states_npz_and_a_csv_row_on_a_full_disk(small_disk):
    """states.npz (np.savez_compressed) with 0 to 600 KiB free of its ~660 KB, and a CSV row that needs a new page
    on a full disk (part of it fits in the file's last page): exit 74, one line, nothing torn or left behind."""
    rng = np.random.default_rng(0)
    observations, steps = rng.standard_normal((20_000, 17)).astype(np.float16), np.arange(20_000)
    path = os.path.join(small_disk, "states.npz")
    for leave in (0, 4096, 64 * 1024, 300 * 1024, 600 * 1024):
        fill(small_disk, leave)
        with pytest.raises(ppo.RunWriteError) as stopped:
            ppo.atomic_write_bytes(path, lambda f: np.savez_compressed(f, observations=observations,
                                                                       global_steps=steps))
        free_space(small_disk)
        assert ppo.failed_write(stopped.value.__cause__) is not None and os.listdir(small_disk) == [], leave
        line = stopped_line(stopped)
        assert line.startswith(f"error: could not write {path} (No space left on device; "), line
    path = os.path.join(small_disk, "evaluations.csv")
    log = ppo.CsvLog(path, ["global_step", "return_mean"])
    step = 0
    while os.path.getsize(path) < 4096 - 40:
        log.write([step, 1.0 / 3.0])
        step += 8
    logged = open(path, "rb").read()
    fill(small_disk, 0)
    with pytest.raises(ppo.RunWriteError) as stopped:
        for _ in range(10):  # the rows that fit in the file's last page are written, the next one fails
            log.write([step, 1.0 / 3.0])
            logged = open(path, "rb").read()
            step += 8
    os.close(log.fd)
    free_space(small_disk)
    assert ppo.failed_write(stopped.value.__cause__) is not None
    assert open(path, "rb").read() == logged and len(logged) <= 4096 and logged.endswith(b"\r\n")
    line = stopped_line(stopped)
    assert line.startswith(f"error: could not write {path} (No space left on device; "), line


def test_tensorboard_on_a_full_disk_stops_in_one_line_without_the_writer_thread_s_traceback(small_disk):
    """A SummaryWriter opening its events file on a full disk: its writer thread's write fails; the error raised
    again in this thread stops the run with one line (writing), and threading's report of the writer thread's
    error is left out (quiet_failed_writes_in_writer_threads); another thread's error is still reported."""
    from torch.utils.tensorboard import SummaryWriter

    reported, saved_hook = [], threading.excepthook
    threading.excepthook = lambda hook_args: reported.append(hook_args.exc_type)  # threading's report, recorded
    try:
        ppo.quiet_failed_writes_in_writer_threads()
        fill(small_disk, 0)
        path = os.path.join(small_disk, "events.out.tfevents.*")
        with pytest.raises(ppo.RunWriteError) as stopped:
            with ppo.writing(path):
                writer = SummaryWriter(small_disk)
                writer.add_scalar("x", 1.0, 0)
                writer.flush()
        writer_threads = [thread for thread in threading.enumerate()
                          if type(thread).__module__.startswith("tensorboard.")]
        for thread in writer_threads:
            thread.join(10)
        free_space(small_disk)
        other = threading.Thread(target=lambda: 1 / 0)
        other.start()
        other.join()
    finally:
        threading.excepthook = saved_hook
    assert ppo.failed_write(stopped.value.__cause__) is not None
    line = stopped_line(stopped)
    assert line.startswith(f"error: could not write {path} (No space left on device; "), line
    assert reported == [ZeroDivisionError]  # the writer thread's OSError left out, another thread's reported
