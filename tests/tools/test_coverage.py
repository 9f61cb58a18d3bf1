"""scripts/coverage.py: the coverage formula on planted point sets, run identification, and the CLI
end to end on synthetic run directories (one real UMAP compilation, ~15 s of numba JIT)."""

import csv
import io
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from scripts import coverage
from tests.fake_algorithm import write_run
from tiny_run import run_command

REPO_ROOT = Path(__file__).resolve().parents[2]  # tests/<folder>/this file


# ---------------------------------------------------------------- coverage_percentage


def test_identical_points_occupy_one_cell():
    points = np.full((50, 2), 3.25)
    assert coverage.coverage_percentage(points, grid_size=100) == pytest.approx(100.0 / 100**2)


def test_spread_far_below_epsilon_stays_in_one_cell():
    # Range 1e-8 per axis: x' <= 1e-8 / (1e-8 + 1e-5) < 0.001, so floor(100 x') = 0 for every point.
    points = np.random.default_rng(0).uniform(0.0, 1e-8, size=(200, 2))
    assert coverage.coverage_percentage(points, grid_size=100) == pytest.approx(0.01)


@pytest.mark.parametrize("grid_size", [1, 7, 100])
def test_cell_centres_occupy_every_cell(grid_size):
    # Points at (i + 0.5, j + 0.5): x' = i / (G - 1 + 1e-5), floor(G x') = i for every i < G.
    centres = np.arange(grid_size) + 0.5
    points = np.stack(np.meshgrid(centres, centres), axis=-1).reshape(-1, 2)
    assert coverage.coverage_percentage(points, grid_size=grid_size) == pytest.approx(100.0)


def test_diagonal_occupies_one_cell_per_row():
    # 10 diagonal cells of a 10 x 10 grid: 10 %.
    centres = np.arange(10) + 0.5
    points = np.stack([centres, centres], axis=1)
    assert coverage.coverage_percentage(points, grid_size=10) == pytest.approx(10.0)


def test_epsilon_shifts_a_point_on_a_cell_border():
    # G = 2 on the unit square: (0.5, 0) maps to x' = 0.5 / (1 + 1e-5) < 0.5 -> cell (0, 0), already
    # occupied; without the epsilon it would open cell (1, 0). Cells: (0,0), (1,1), (0,1) -> 3 of 4.
    points = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.5, 0.0]])
    assert coverage.coverage_percentage(points, grid_size=2) == pytest.approx(75.0)


def test_coverage_matches_a_per_point_reference():
    rng = np.random.default_rng(1)
    points = np.concatenate([rng.normal(size=(300, 2)), rng.uniform(5, 9, size=(100, 2))])
    grid_size = 13
    low, high = points.min(axis=0), points.max(axis=0)
    cells = set()
    for x, y in points:
        cx = min(math.floor((x - low[0]) / (high[0] - low[0] + 1e-5) * grid_size), grid_size - 1)
        cy = min(math.floor((y - low[1]) / (high[1] - low[1] + 1e-5) * grid_size), grid_size - 1)
        cells.add((cx, cy))
    expected = 100.0 * len(cells) / grid_size**2
    assert coverage.coverage_percentage(points, grid_size=grid_size) == pytest.approx(expected)


@pytest.mark.parametrize(
    "points, grid_size",
    [
        (np.zeros((4, 2)), 0),
        (np.zeros((4, 2)), True),
        (np.zeros((4, 2)), 2.5),
        (np.zeros((4, 3)), 10),
        (np.zeros((0, 2)), 10),
        (np.array([[0.0, np.nan], [1.0, 1.0]]), 10),
    ],
)
def test_coverage_rejects_bad_input(points, grid_size):
    with pytest.raises(ValueError):
        coverage.coverage_percentage(points, grid_size=grid_size)


# ---------------------------------------------------------------- run identification


def test_describe_run_reads_the_algorithm_scripts_config(tmp_path):
    run_dir = tmp_path / "anywhere"
    write_run(str(run_dir), method="EPPO_cor", env_id="Ant-v5", experiment="paralysis", strategy="parallel", seed=7)
    info = coverage.describe_run(run_dir)
    assert (str(info.setting), info.method, info.seed) == ("paralysis/Ant/parallel", "EPPO_cor", 7)


def test_describe_run_derives_the_eppo_variant_from_script_and_args(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    args = {"env_id": "HalfCheetah-v5", "experiment": "slippery", "strategy": "increasing", "seed": 3, "variant": "ind"}
    (run_dir / "config.json").write_text(json.dumps({"args": args, "script": "eppo_continuous.py"}))
    info = coverage.describe_run(run_dir)
    assert (str(info.setting), info.method, info.seed) == ("slippery/HalfCheetah/increasing", "EPPO_ind", 3)
    # A flat config with CleanRL's exp_name works too.
    flat = {"env_id": "Ant-v5", "experiment": "paralysis", "strategy": "back-one", "seed": 2,
            "exp_name": "ppo_drnd_continuous"}
    (run_dir / "config.json").write_text(json.dumps(flat))
    assert coverage.describe_run(run_dir).method == "PPO_DRND"


def test_describe_run_falls_back_to_the_sweep_layout(tmp_path):
    run_dir = tmp_path / "sweep" / "paralysis" / "Ant" / "parallel" / "PFO" / "seed3"
    run_dir.mkdir(parents=True)
    info = coverage.describe_run(run_dir)
    assert (str(info.setting), info.method, info.seed) == ("paralysis/Ant/parallel", "PFO", 3)
    # config.json without a method/script: the path still names the method.
    (run_dir / "config.json").write_text(json.dumps({"args": {"seed": 3}}))
    assert coverage.describe_run(run_dir).method == "PFO"


def test_describe_run_without_any_identity_uses_the_directory_name(tmp_path, capsys):
    run_dir = tmp_path / "my_run"
    run_dir.mkdir()
    info = coverage.describe_run(run_dir)
    assert (str(info.setting), info.method, info.seed) == ("?/?/?", "my_run", None)
    assert "cannot tell the method" in capsys.readouterr().err


# ---------------------------------------------------------------- CLI


def write_states(run_dir, observations):
    os.makedirs(run_dir, exist_ok=True)
    steps = np.arange(len(observations), dtype=np.int64) * 10
    np.savez(os.path.join(run_dir, "states.npz"), observations=observations.astype(np.float16), global_steps=steps)


def synthetic_observations(seed, n=200, dim=17, spread=1.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0 * spread, size=(4, dim))
    return centres[rng.integers(0, 4, size=n)] + rng.normal(scale=spread, size=(n, dim))


def test_cli_missing_states_names_the_run_and_the_flag(tmp_path):
    run_dir = tmp_path / "run_without_states"
    write_run(str(run_dir), method="PPO")
    # As a script (python scripts/coverage.py): exercises the non-package imports too.
    result = run_command([sys.executable, "scripts/coverage.py", str(run_dir)], REPO_ROOT, timeout=120)
    assert result.returncode == 2
    assert str(run_dir) in result.stderr and "--save-states" in result.stderr
    assert result.stdout == ""


def test_cli_rejects_unusable_input(tmp_path, capsys):
    no_key = tmp_path / "no_key"
    no_key.mkdir()
    np.savez(no_key / "states.npz", obs=np.zeros((20, 3)))
    too_few = tmp_path / "too_few"
    write_states(too_few, np.zeros((coverage.MIN_POINTS - 1, 3)))
    assert coverage.main([str(no_key)]) == 2
    assert "'observations'" in capsys.readouterr().err
    assert coverage.main([str(too_few)]) == 2
    assert f"at least {coverage.MIN_POINTS}" in capsys.readouterr().err
    assert coverage.main([str(too_few), str(too_few)]) == 2
    assert "more than once" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        coverage.main([str(too_few), "--grid-size", "0"])
    assert exit_info.value.code == 2


def test_cli_end_to_end_with_umap(tmp_path, capsys):
    root = tmp_path / "sweep"
    ppo_dirs = [root / "paralysis" / "HalfCheetah" / "back-one" / "PPO" / f"seed{seed}" for seed in (1, 2)]
    for seed, run_dir in zip((1, 2), ppo_dirs):
        write_run(str(run_dir), method="PPO", seed=seed)
        write_states(run_dir, synthetic_observations(seed))
    eppo_dir = root / "paralysis" / "HalfCheetah" / "back-one" / "EPPO_ind" / "seed1"
    write_states(eppo_dir, synthetic_observations(10, spread=2.0))  # no config.json: identity from the path
    run_dirs = [str(eppo_dir), *map(str, ppo_dirs)]

    assert coverage.main([*run_dirs, "--format", "csv", "--seed", "0"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [tuple(row[k] for k in ("level", "method", "seed")) for row in table] == [
        ("run", "PPO", "1"), ("run", "PPO", "2"), ("run", "EPPO_ind", "1"),
        ("method", "PPO", ""), ("method", "EPPO_ind", ""),
    ]  # fmt: skip
    assert ({(row["experiment"], row["env"], row["strategy"]) for row in table}
            == {("paralysis", "HalfCheetah", "back-one")})
    runs = {(row["method"], row["seed"]): float(row["coverage"]) for row in table if row["level"] == "run"}
    for value in runs.values():
        # A multiple of one cell (0.01 %) and far from 0 or 100 % for 200 clustered states.
        assert 0.1 < value < 30.0 and value * 100 == pytest.approx(round(value * 100))

    # The CLI's number is the formula applied to this run's own UMAP projection of its float16 states.
    with np.load(ppo_dirs[1] / "states.npz") as saved:
        embedding = coverage.project_umap(saved["observations"].astype(np.float32), seed=0)
    assert runs[("PPO", "2")] == pytest.approx(coverage.coverage_percentage(embedding, grid_size=100))

    ppo_row = next(row for row in table if row["level"] == "method" and row["method"] == "PPO")
    a, b = runs[("PPO", "1")], runs[("PPO", "2")]
    # Two values: mean (a + b) / 2, std(ddof=1) = |a - b| / sqrt(2), SE = std / sqrt(2) = |a - b| / 2.
    assert (int(ppo_row["runs"]), float(ppo_row["coverage"])) == (2, pytest.approx((a + b) / 2))
    assert float(ppo_row["coverage_se"]) == pytest.approx(abs(a - b) / 2)
    eppo_row = next(row for row in table if row["level"] == "method" and row["method"] == "EPPO_ind")
    assert (int(eppo_row["runs"]), eppo_row["coverage_se"]) == (1, "")

    # Markdown with subsampling: 100 of 200 states on a 50 x 50 grid occupy at most 100 cells = 4 %.
    assert coverage.main([str(ppo_dirs[0]), "--max-points", "100", "--grid-size", "50"]) == 0
    output = capsys.readouterr().out
    assert "## Coverage per run (grid 50 x 50, UMAP random_state 0)" in output
    run_line = next(line for line in output.splitlines()
                    if line.startswith("| paralysis/HalfCheetah/back-one | PPO | 1 |"))
    cells = [cell.strip() for cell in run_line.strip("|").split("|")]
    assert cells[3] == "100" and 0.0 < float(cells[4]) <= 4.0 and cells[5] == str(ppo_dirs[0])
    assert f"| paralysis/HalfCheetah/back-one | PPO | 1 | {cells[4]} ± n/a |" in output


def test_script_mode_does_not_shadow_the_coverage_package():
    # Run as a script, scripts/ is sys.path[0] and scripts/coverage.py would shadow the `coverage`
    # package that numba (imported by umap) probes for: `import numba` then raised AttributeError.
    code = (
        "import runpy, sys; sys.path.insert(0, 'scripts'); "
        "runpy.run_path('scripts/coverage.py', run_name='as_script'); import numba"
    )
    result = run_command([sys.executable, "-c", code], REPO_ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
