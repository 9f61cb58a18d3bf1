"""In CI nothing skips silently: a guard that cannot run (no SLURM, no reference commit for the golden outputs)
skips with its reason on a workstation and fails with that reason when the CI environment variable is set."""

import os
import subprocess
import sys

import pytest

from tiny_run import REPO_ROOT, cannot_run


@pytest.mark.parametrize("value, outcome", [("true", pytest.fail.Exception), ("1", pytest.fail.Exception),
                                            ("", pytest.skip.Exception), ("false", pytest.skip.Exception)])
def test_a_guard_that_cannot_run_fails_in_ci_and_skips_elsewhere(monkeypatch, value, outcome):
    monkeypatch.setenv("CI", value)
    with pytest.raises(outcome, match="SLURM not installed"):
        cannot_run("SLURM not installed")


def test_the_slurm_test_fails_with_its_reason_in_ci_when_slurm_cannot_run(tmp_path):
    """tests/tools/test_slurm.py in a pytest of its own, with a PATH where no SLURM tool is found and CI=true: it fails
    (no test of it passes or skips) and the report names why."""
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:xdist", "-p", "no:cacheprovider",
                             os.path.join("tests", "tools", "test_slurm.py")], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "CI": "true", "PATH": str(tmp_path)})
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "SLURM not installed (sbatch, squeue, slurmctld, slurmd, munged not found)" in result.stdout
    assert " passed" not in result.stdout and "skipped" not in result.stdout
