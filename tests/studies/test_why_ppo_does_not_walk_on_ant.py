"""The study "why our PPO does not walk on Ant-v5", studies/2026-11-27_why_ppo_does_not_walk_on_ant/ (the screen
of the readings the paper leaves open, which chose v0.2's defaults): collect.py's training.csv from TensorBoard events,
analyze.py's statistics on synthetic outputs with known answers, and the committed tables regenerated from the
committed outputs."""

import csv
import importlib.util
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tiny_run import REPO_ROOT

ANT_WALK = os.path.join(REPO_ROOT, "studies", "2026-11-27_why_ppo_does_not_walk_on_ant")


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"ant_walk_{name}", os.path.join(ANT_WALK, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


collect, analyze = load("collect"), load("analyze")
# halfcheetah_check imports its neighbour analyze by that name: lend it ours while it loads, then give the name back
# (studies/2026-11-26_paper_length_v0.1_defaults has an analyze.py of its own, imported by that name in
# tests/studies/test_paper_length_v0_1_defaults.py)
_previous_analyze = sys.modules.get("analyze")
sys.modules["analyze"] = analyze
try:
    halfcheetah_check = load("halfcheetah_check")
finally:
    if _previous_analyze is None:
        del sys.modules["analyze"]
    else:
        sys.modules["analyze"] = _previous_analyze


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def test_training_rows_summarize_the_events_between_evaluations(tmp_path):
    """Per evaluation step: the last action std logged at or before it, and the mean length and return of the
    training episodes that ended after the previous evaluation and at or before it."""
    from torch.utils.tensorboard import SummaryWriter

    write_csv(tmp_path / "evaluations.csv", ["global_step", "return_mean"], [[0, 1.0], [100, 2.0], [200, 3.0]])
    writer = SummaryWriter(str(tmp_path))
    for step, std in ((50, 0.9), (100, 0.8), (150, 0.7)):
        writer.add_scalar("charts/action_std", std, step)
    for step, length, episode_return in ((30, 30, -5.0), (90, 60, -1.0), (100, 10, 4.0), (170, 70, 10.0)):
        writer.add_scalar("charts/episodic_length", length, step)
        writer.add_scalar("charts/episodic_return", episode_return, step)
    writer.close()
    rows = collect.training_rows(str(tmp_path))
    assert [row[0] for row in rows] == [0, 100, 200]
    assert rows[0] == [0, "", "", ""]
    assert (rows[1][1] == pytest.approx(0.8) and rows[1][2] == pytest.approx(100 / 3)
            and rows[1][3] == pytest.approx(-2 / 3))
    assert rows[2][1] == pytest.approx(0.7) and rows[2][2] == pytest.approx(70) and rows[2][3] == pytest.approx(10)


def test_at_step_takes_the_evaluation_or_the_mean_of_its_two_neighbours():
    rows = [{"global_step": str(s), "return_mean": str(v)}
            for s, v in ((240_000, 100.0), (260_000, 300.0), (500_000, 7.0))]
    assert analyze.at_step(rows, 500_000) == 7.0
    assert analyze.at_step(rows, 250_000) == 200.0
    assert analyze.at_step(rows, 1_000_000) is None  # not reached


def test_standing_still_is_the_zero_actions_return_on_the_evaluation_episodes():
    """About 1 per step for 1,000 steps (healthy reward, no control cost, a small contact cost and drift)."""
    returns = analyze.standing_still_returns([1001, 1002], episodes=2)
    assert set(returns) == {1001, 1002} and all(950 < value < 1010 for value in returns.values())


def test_summary_counts_evaluations_above_standing_still(tmp_path, monkeypatch):
    """One configuration, two seeds: seed 1 above its standing-still return (990) at 40k and 60k of 3 later
    evaluations, seed 2 never."""
    outputs = tmp_path / "outputs"
    for seed, returns in ((1, [990, 500, 1000, 1200]), (2, [990, 100, 200, 300])):
        run = outputs / "500000" / "ours" / f"seed{seed}"
        run.mkdir(parents=True)
        steps = [0, 20_000, 40_000, 60_000]
        write_csv(run / "evaluations.csv", ["global_step", "return_mean"], zip(steps, returns))
        write_csv(run / "training.csv", collect.TRAINING_COLUMNS, [[s, 1.0 - s / 1e5, 100, 0.0] for s in steps])
    monkeypatch.setattr(analyze, "OUTPUTS", str(outputs))
    configs = [c for c in analyze.discover() if c[0] == "ours (500k)"]
    (row,) = analyze.summarize(configs, {1: 990.0, 2: 990.0})
    assert row["above"] == "33% (2/6)" and row["first"] == "40k, never" and row["steps"] == 60_000


def test_the_halfcheetah_check_is_the_paired_one_sided_t_test_in_closed_form():
    """Three seeds: differences -2, -1, +6 (mean 1, sd sqrt(19)), t = 1 / (sqrt(19) / sqrt(3)); with 2 degrees of
    freedom the t distribution's CDF is 1/2 + t / (2 sqrt(2 + t^2)), which is p for "lower than the baseline"."""
    seeds, difference, p = halfcheetah_check.paired_less({1: 10.0, 2: 20.0, 3: 36.0, 4: 1.0},
                                                         {1: 12.0, 2: 21.0, 3: 30.0})
    t = 1 / (math.sqrt(19) / math.sqrt(3))
    assert seeds == [1, 2, 3] and difference == pytest.approx(1.0)
    assert p == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), rel=1e-12)
    assert halfcheetah_check.paired_less({1: 5.0, 2: 6.0}, {1: 4.0, 2: 5.0}) == ([1, 2], 1.0, None)  # sd 0: no t
    assert halfcheetah_check.paired_less({1: 5.0}, {1: 4.0}) == ([1], None, None)  # one seed: no test


def test_the_committed_table_is_what_analyze_prints_from_the_committed_outputs():
    printed = subprocess.run([sys.executable, os.path.join(ANT_WALK, "analyze.py")], capture_output=True, text=True,
                             check=True, cwd=REPO_ROOT).stdout
    with open(os.path.join(ANT_WALK, "screen_tables.md")) as f:
        assert printed == f.read()


def test_the_committed_eppo_scale_table_is_what_eppo_scale_prints_from_the_committed_outputs():
    outputs = os.path.join(ANT_WALK, "eppo_scale_outputs")
    printed = subprocess.run([sys.executable, os.path.join(ANT_WALK, "eppo_scale.py"),
                              os.path.join(outputs, "no-norm-reward"), os.path.join(outputs, "norm-reward")],
                             capture_output=True, text=True, check=True, cwd=REPO_ROOT).stdout
    with open(os.path.join(ANT_WALK, "eppo_scale.md")) as f:
        assert printed in f.read()


def test_the_committed_halfcheetah_check_is_what_halfcheetah_check_prints():
    printed = subprocess.run([sys.executable, os.path.join(ANT_WALK, "halfcheetah_check.py")], capture_output=True,
                             text=True, check=True, cwd=REPO_ROOT).stdout
    with open(os.path.join(ANT_WALK, "halfcheetah_check.md")) as f:
        assert printed == f.read()


short_study = load("short_study")


def test_the_short_study_counts_evaluations_above_the_step_zero_return():
    """Step-0 return 990; after it 500, 1,000, 1,200 at 50k, 100k, 150k: two of three above, first at 100k; a cut at
    100k keeps one of two; a run that never gets above has no first step."""
    from scripts.summarize import Evaluation

    evaluations = [Evaluation(step, 0, value) for step, value in ((0, 990.0), (50_000, 500.0), (100_000, 1000.0),
                                                                  (150_000, 1200.0))]
    assert short_study.above_standing_still(evaluations, 150_000) == (2, 3, 100_000)
    assert short_study.above_standing_still(evaluations, 100_000) == (1, 2, 100_000)
    assert short_study.above_standing_still(evaluations[:2], 150_000) == (0, 1, None)


def test_the_committed_short_study_table_is_what_short_study_prints():
    printed = subprocess.run([sys.executable, os.path.join(ANT_WALK, "short_study.py")], capture_output=True,
                             text=True, check=True, cwd=REPO_ROOT).stdout
    with open(os.path.join(ANT_WALK, "short_study.md")) as f:
        assert printed == f.read()
