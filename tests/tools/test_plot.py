"""scripts/plot_curves.py on synthetic runs: the aggregated numbers and non-empty figure files."""

import os

import pytest

from scripts import plot_curves, runlist, summarize
from tests.fake_algorithm import write_run

SETTING = runlist.Setting("slippery", "Ant", "increasing")


def make_runs(root):
    """PPO and EPPO_cor, seeds 1-2, 2 tasks of 100 steps, eval every 50: returns seed * (1 + step / 100)."""
    for method, offset in (("PPO", 0.0), ("EPPO_cor", 10.0)):
        for seed in (1, 2):
            write_run(runlist.run_dir(str(root), SETTING, method, seed), method=method, env_id="Ant-v5", experiment="slippery",
                      strategy="increasing", seed=seed, kappa=0.1 if method == "EPPO_cor" else None,
                      returns=lambda step, task, seed=seed, offset=offset: offset + seed * (1 + step / 100),
                      plasticity=lambda step, network, seed=seed: (100.0 - step / 10 - seed, 50.0, float(seed + step / 100)))  # fmt: skip


def test_mean_curve_legend_and_task_end_plasticity(tmp_path):
    make_runs(tmp_path)
    groups, _ = summarize.group_runs(summarize.load_runs(str(tmp_path)))
    runs = [groups[(SETTING, "PPO")][seed] for seed in (1, 2)]
    steps, mean, se = plot_curves.mean_curve(runs)
    # seed 1: 1, 1.5, 2, 2.5, 3; seed 2: twice that -> mean 1.5 * (1 + step / 100), se = |a - b| / 2 for two values
    assert steps.tolist() == [0, 50, 100, 150, 200]
    assert mean == pytest.approx(1.5 * (1 + steps / 100))
    assert se == pytest.approx(0.5 * (1 + steps / 100))
    # AULC per seed: seed * 2 -> 2, 4 (mean 3, se 1); Final Return: seed * (2 + 3) / 2 -> 2.5, 5 (mean 3.75, se 1.25)
    assert plot_curves.legend_label("PPO", runs, 2) == "PPO: 3.00 ± 1.00, 3.75 ± 1.25"
    rows = plot_curves.read_plasticity(runs[0].run_dir)
    # task ends at steps 100 and 200: effective rank 100 - 10 - 1 = 89 and 100 - 20 - 1 = 79 -> 84
    assert plot_curves.task_end_plasticity(rows, 100, 2, "critic") == {"effective_rank": 84.0, "stable_rank": 50.0, "dormant_percent": 2.5}
    assert plot_curves.task_end_plasticity(rows, 100, 3, "critic") is None  # a task end is missing
    with pytest.raises(ValueError, match="different steps"):
        runs[1].evaluations = runs[1].evaluations[:-1]
        plot_curves.mean_curve(runs)


def test_seed_curves_and_profile_thresholds(tmp_path):
    make_runs(tmp_path)
    groups, _ = summarize.group_runs(summarize.load_runs(str(tmp_path)))
    cells = {m: [groups[(SETTING, m)][seed] for seed in (1, 2)] for m in ("PPO", "EPPO_cor")}
    steps, returns = plot_curves.seed_curves(cells["EPPO_cor"])
    # one row per seed: 10 + seed * (1 + step / 100); their mean is mean_curve's
    assert returns.tolist() == [pytest.approx(10 + seed * (1 + steps / 100)) for seed in (1, 2)]
    assert plot_curves.mean_curve(cells["EPPO_cor"])[1] == pytest.approx(returns.mean(axis=0))
    # AULC per seed: PPO 2, 4; EPPO_cor 12, 14 -> thresholds from just below 2 up to 14
    taus = plot_curves.profile_taus(cells, "aulc", points=11)
    assert len(taus) == 11 and taus[0] < 2.0 and taus[-1] == pytest.approx(14.0)
    fraction, _, _ = summarize.performance_profile([[r.aulc for r in cells["EPPO_cor"]]], taus, reps=100)
    assert fraction[0] == 1.0 and fraction[-1] == 0.0  # each profile falls from 1 to 0 across the range
    # PPO's runs: every tau in [2, 4) has exactly 1 of 2 runs above it
    ppo, _, _ = summarize.performance_profile([[r.aulc for r in cells["PPO"]]], taus, reps=100)
    assert ppo.tolist() == [1.0 if t < 2 else 0.5 if t < 4 else 0.0 for t in taus]


def test_figures_are_written(tmp_path):
    make_runs(tmp_path / "root")
    out = tmp_path / "plots"
    assert plot_curves.main([str(tmp_path / "root"), "--out", str(out), "--formats", "png"]) == 0
    names = sorted(os.listdir(out))
    stem = "slippery_Ant_increasing"
    assert names == [f"{stem}_{kind}.png" for kind in ("curves", "plasticity_box", "plasticity_evolution", "profile", "seeds")]
    for name in names:
        with open(out / name, "rb") as f:
            data = f.read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_no_complete_runs(tmp_path):
    assert plot_curves.main([str(tmp_path / "nothing")]) == 2
    write_run(runlist.run_dir(str(tmp_path), SETTING, "PPO", 1), finished=False)
    assert plot_curves.main([str(tmp_path), "--formats", "png"]) == 1


def test_runs_whose_flags_differ_are_not_drawn_as_one_curve(tmp_path, capsys):
    """One PPO seed with another learning rate: the figures refuse to pool it (summarize.py's check, exit 2);
    --split-by-config draws it as its own method."""
    import json

    make_runs(tmp_path)
    config_path = os.path.join(runlist.run_dir(str(tmp_path), SETTING, "PPO", 2), "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["args"]["learning_rate"] = 0.001
    with open(config_path, "w") as f:
        json.dump(config, f)
    assert plot_curves.main([str(tmp_path), "--out", str(tmp_path / "plots"), "--formats", "png"]) == 2
    error = capsys.readouterr().err
    assert "differ in config.json" in error and "learning_rate" in error
    assert not os.path.exists(tmp_path / "plots") or not os.listdir(tmp_path / "plots")
    assert plot_curves.main([str(tmp_path), "--out", str(tmp_path / "plots"), "--formats", "png",
                             "--split-by-config"]) == 0
    assert os.listdir(tmp_path / "plots")
