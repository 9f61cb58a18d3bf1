"""scripts/benchmark_sps.py runs a script in-process and reports consistent figures (no timing asserted)."""

import os
import re
import subprocess
import sys

from tiny_run import REPO_ROOT


def test_benchmark_reports_raw_and_training_throughput():
    command = [sys.executable, os.path.join(REPO_ROOT, "scripts", "benchmark_sps.py"), "ppo_continuous.py",
               "--steps", "256", "--raw-steps", "300", "--num-seeds", "2", "--", "--num-steps", "128",
               "--minibatch-size", "64",
               "--update-epochs", "1", "--eval-episodes", "1", "--max-episode-steps", "20", "--no-cuda"]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    figures = dict(re.findall(r"^(raw env SPS|train SPS|train / raw)\s+([\d,.]+)", result.stdout, re.M))
    raw, train = (float(figures[k].replace(",", "")) for k in ("raw env SPS", "train SPS"))
    per_seed = float(re.search(r"([\d,.]+) per seed", result.stdout).group(1).replace(",", ""))
    assert raw > 0 and train > 0 and re.search(r"^seeds\s+2 in one process on cpu$", result.stdout, re.M)
    assert abs(per_seed - train / 2) <= 1  # the aggregate is two seeds' steps over the same time
    assert abs(float(figures["train / raw"]) - train / raw) < 0.002
    assert "evaluations per 500,000-step task" in result.stdout
