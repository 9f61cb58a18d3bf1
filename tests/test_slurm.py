"""scripts/slurm_sweep.sh on a real single-node SLURM started by scripts/slurm_local.sh.

Skipped when SLURM is not installed (`scripts/slurm_local.sh install` installs it) or without root.
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

SCRIPTS = os.path.join(runlist.REPO_ROOT, "scripts")
MISSING = [tool for tool in ("sbatch", "squeue", "slurmctld", "slurmd", "munged") if shutil.which(tool) is None]
SETTING = runlist.Setting("paralysis", "HalfCheetah", "back-one")

pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=f"SLURM not installed ({', '.join(MISSING)} not found); run scripts/slurm_local.sh install"),
    pytest.mark.skipif(os.geteuid() != 0, reason="scripts/slurm_local.sh start needs root"),
]


@pytest.fixture(scope="module")
def slurm_env():
    state_dir = os.environ.get("EPPO_SLURM_DIR", "/tmp/eppo-slurm")
    env = {**os.environ, "EPPO_SLURM_DIR": state_dir, "SLURM_CONF": os.path.join(state_dir, "slurm.conf"), "EPPO_TOOLS_PYTHON": sys.executable}
    local = os.path.join(SCRIPTS, "slurm_local.sh")
    running = subprocess.run(["bash", local, "status"], env=env, capture_output=True).returncode == 0
    if not running:
        started = subprocess.run(["bash", local, "start"], env=env, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stdout + started.stderr
    yield env
    if not running:
        subprocess.run(["bash", local, "stop"], env=env, capture_output=True, timeout=120)


def submit(env, *args):
    result = subprocess.run(["bash", os.path.join(SCRIPTS, "slurm_sweep.sh"), *args], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def wait_for(env, job_id, timeout):
    deadline = time.time() + timeout
    while subprocess.run(["squeue", "-h", "-j", job_id], env=env, capture_output=True, text=True).stdout.strip():
        assert time.time() < deadline, f"job {job_id} still queued after {timeout} s"
        time.sleep(0.5)


def test_array_of_two_real_tiny_runs(tmp_path, slurm_env):
    root = str(tmp_path / "root")
    selection = ["--methods", "PPO", "--settings", str(SETTING), "--seeds", "1-2", "--root", root, "--python", sys.executable]
    out = submit(slurm_env, *selection, "--max-parallel", "2", "--", *TINY_FLAGS)
    job_id = re.search(r"job array\(s\) (\d+)", out).group(1)
    assert f"squeue -j {job_id}" in out
    wait_for(slurm_env, job_id, timeout=300)
    for seed in (1, 2):
        run = summarize.load_run(runlist.run_dir(root, SETTING, "PPO", seed))
        assert run.complete, (run.problems, open(os.path.join(run.run_dir, "stderr.log")).read())
        assert len(run.evaluations) == 5
        with open(os.path.join(root, "slurm", "logs", f"{job_id}_{seed - 1}.out")) as f:
            assert "exit code 0" in f.read()
    assert "nothing to submit" in submit(slurm_env, *selection, "--", *TINY_FLAGS)


def test_preempted_run_requeues_and_resumes(tmp_path, slurm_env):
    algorithms = tmp_path / "algorithms"
    algorithms.mkdir()
    shutil.copy(FAKE_SCRIPT, algorithms / "ppo_continuous.py")
    root = str(tmp_path / "root")
    env = {**slurm_env, "FAKE_PREEMPT_ONCE": "1"}  # first attempt exits 75, as after SIGTERM with a checkpoint
    out = submit(env, "--methods", "PPO", "--settings", str(SETTING), "--seeds", "1-2", "--root", root,
                 "--scripts-dir", str(algorithms), "--python", sys.executable)  # fmt: skip
    job_id = re.search(r"job array\(s\) (\d+)", out).group(1)
    wait_for(slurm_env, job_id, timeout=180)  # the requeued task is eligible again after ~11 s
    for task in (0, 1):
        assert os.path.isfile(os.path.join(runlist.run_dir(root, SETTING, "PPO", task + 1), "summary.json"))
        with open(os.path.join(root, "slurm", "logs", f"{job_id}_{task}.out")) as f:
            log = f.read()
        assert f"requeueing {job_id}_{task}" in log and "restart 1)" in log and log.rstrip().endswith("exit code 0")
