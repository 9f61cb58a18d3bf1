"""scripts/slurm_sweep.sh on a real single-node SLURM started by scripts/slurm_local.sh.

Skipped when SLURM is not installed (`scripts/slurm_local.sh install` installs it) or without root; in CI (the CI
environment variable set) these fail instead.
Uses a running local cluster if there is one, else starts one and stops it at the end.
"""

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from scripts import runlist, summarize
from tests.fake_algorithm import FAKE_SCRIPT, TINY_FLAGS
from tests.tiny_run import cannot_run

SCRIPTS = os.path.join(runlist.REPO_ROOT, "scripts")
MISSING = [tool for tool in ("sbatch", "squeue", "slurmctld", "slurmd", "munged") if shutil.which(tool) is None]
SETTING = runlist.Setting("paralysis", "HalfCheetah", "back-one")


@pytest.fixture(scope="module", autouse=True)
def slurm_can_run():
    """Skipped with the reason when SLURM cannot run here; in CI, where .ci/run installs it, a failure (cannot_run).
    Autouse and module-scoped: it comes before slurm_env."""
    if MISSING:
        cannot_run(f"SLURM not installed ({', '.join(MISSING)} not found); run scripts/slurm_local.sh install")
    if os.geteuid() != 0:
        cannot_run("scripts/slurm_local.sh start needs root")


@pytest.fixture(scope="module")
def slurm_env():
    state_dir = os.environ.get("EPPO_SLURM_DIR", "/tmp/eppo-slurm")
    env = {**os.environ, "EPPO_SLURM_DIR": state_dir, "SLURM_CONF": os.path.join(state_dir, "slurm.conf"),
           "EPPO_TOOLS_PYTHON": sys.executable}
    local = os.path.join(SCRIPTS, "slurm_local.sh")
    running = subprocess.run(["bash", local, "status"], env=env, capture_output=True).returncode == 0
    if not running:
        started = subprocess.run(["bash", local, "start"], env=env, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stdout + started.stderr
    yield env
    if not running:
        subprocess.run(["bash", local, "stop"], env=env, capture_output=True, timeout=120)


def submit(env, *args):
    result = subprocess.run(["bash", os.path.join(SCRIPTS, "slurm_sweep.sh"), *args], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def wait_for(env, job_id, timeout):
    deadline = time.time() + timeout
    while subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True).stdout.strip():
        assert time.time() < deadline, f"job {job_id} still queued after {timeout} s"
        time.sleep(0.5)


def job_id_of(submit_output):
    return re.search(r"job array\(s\) (\d+)", submit_output).group(1)


def test_array_of_real_tiny_runs_and_requeue_of_a_preempted_run(tmp_path, slurm_env):
    """Two arrays at once (one test, so that pytest-xdist workers never share the cluster's lifecycle):
    two real tiny ppo_continuous.py runs, and two fake runs whose first attempt exits 75 and must be requeued; and a
    real run preempted by SIGTERM half-way, requeued, resumed through its run directory's lock, bit for bit."""
    real_root = str(tmp_path / "real")
    selection = ["--methods", "PPO", "--settings", str(SETTING), "--seeds", "1-2", "--root", real_root,
                 "--python", sys.executable]
    out = submit(slurm_env, *selection, "--max-parallel", "2", "--", *TINY_FLAGS)
    real_job = job_id_of(out)
    assert f"squeue -j {real_job}" in out

    algorithms = tmp_path / "algorithms"
    algorithms.mkdir()
    shutil.copy(FAKE_SCRIPT, algorithms / "ppo_continuous.py")
    fake_root = str(tmp_path / "fake")
    env = {**slurm_env, "FAKE_PREEMPT_ONCE": "1"}  # first attempt exits 75, as after SIGTERM with a checkpoint
    fake_job = job_id_of(submit(env, "--methods", "PPO", "--settings", str(SETTING), "--seeds", "1-2",
                                "--root", fake_root, "--scripts-dir", str(algorithms),
                                "--python", sys.executable))  # fmt: skip

    # A real run preempted half-way: SIGTERM to the batch shell once the run has written a checkpoint (slurm_task.sh
    # and run_one.sh forward it to the run), exit 75, requeue; the second attempt takes the run directory's lock
    # (freed when the first process exited) and resumes, and ends bit for bit as a run that never stopped.
    preempted_root = str(tmp_path / "preempted")
    long_flags = [*TINY_FLAGS, "--checkpoint-frequency", "128"]
    long_flags[long_flags.index("--steps-per-task") + 1] = "2048"  # 4,096 steps: time to signal it half-way
    preempted_job = job_id_of(submit(slurm_env, "--methods", "PPO", "--settings", str(SETTING), "--seeds", "1",
                                     "--root", preempted_root, "--python", sys.executable, "--", *long_flags))
    preempted_dir = runlist.run_dir(preempted_root, SETTING, "PPO", 1)
    deadline = time.time() + 300
    while not os.path.exists(os.path.join(preempted_dir, "checkpoint.pt")):
        assert time.time() < deadline, "the preempted run never wrote a checkpoint"
        time.sleep(0.05)
    subprocess.run(["scancel", "--batch", "--signal=TERM", f"{preempted_job}_0"], env=slurm_env, check=True)

    wait_for(slurm_env, real_job, timeout=300)
    wait_for(slurm_env, fake_job, timeout=180)  # a requeued task is eligible again after ~11 s
    wait_for(slurm_env, preempted_job, timeout=300)
    with open(os.path.join(preempted_root, "slurm", "logs", f"{preempted_job}_0.out")) as f:
        log = f.read()
    assert f"requeueing {preempted_job}_0" in log and "restart 1)" in log and log.rstrip().endswith("exit code 0")
    with open(os.path.join(preempted_dir, "stdout.log")) as f:
        stdout = f.read()
    assert "exit code 75" in stdout and "resuming" in stdout, stdout[-2000:]
    command = re.search(r"^\[run_one [^\]]*\] (.*)$", stdout, re.MULTILINE).group(1)  # the run list's command
    straight_dir = str(tmp_path / "straight")
    straight = subprocess.run(command.replace(preempted_dir, straight_dir), shell=True, cwd=runlist.REPO_ROOT,
                              capture_output=True, text=True, timeout=300)
    assert straight.returncode == 0, straight.stderr[-2000:]
    for name in ("evaluations.csv", "plasticity.csv"):
        with open(os.path.join(preempted_dir, name), "rb") as a, open(os.path.join(straight_dir, name), "rb") as b:
            assert a.read() == b.read(), name
    for task in (0, 1):
        run = summarize.load_run(runlist.run_dir(real_root, SETTING, "PPO", task + 1))
        assert run.complete, (run.problems, open(os.path.join(run.run_dir, "stderr.log")).read())
        assert len(run.evaluations) == 5
        with open(os.path.join(real_root, "slurm", "logs", f"{real_job}_{task}.out")) as f:
            assert "exit code 0" in f.read()

        assert os.path.isfile(os.path.join(runlist.run_dir(fake_root, SETTING, "PPO", task + 1), "summary.json"))
        with open(os.path.join(fake_root, "slurm", "logs", f"{fake_job}_{task}.out")) as f:
            log = f.read()
        assert f"requeueing {fake_job}_{task}" in log and "restart 1)" in log and log.rstrip().endswith("exit code 0")
    assert "nothing to submit" in submit(slurm_env, *selection, "--", *TINY_FLAGS)
