"""scripts/plot_curves.py on synthetic runs: the aggregated numbers and non-empty figure files."""

import os

import pytest

import nonstationary_envs
from scripts import plot_curves, runlist, summarize
from tests.fake_algorithm import write_run

SETTING = runlist.Setting("slippery", "Ant", "increasing")


def make_runs(root):
    """PPO and EPPO_cor, seeds 1-2, 2 tasks of 100 steps, eval every 50: returns seed * (1 + step / 100)."""
    for method, offset in (("PPO", 0.0), ("EPPO_cor", 10.0)):
        for seed in (1, 2):
            write_run(runlist.run_dir(str(root), SETTING, method, seed), method=method, env_id="Ant-v5",
                      experiment="slippery", strategy="increasing", seed=seed,
                      kappa=0.1 if method == "EPPO_cor" else None,
                      schedule=nonstationary_envs.task_schedule("Ant-v5", "slippery", "increasing"),
                      returns=lambda step, task, seed=seed, offset=offset: offset + seed * (1 + step / 100),
                      plasticity=lambda step, network, seed=seed: (100.0 - step / 10 - seed, 50.0,
                                                                   float(seed + step / 100)))  # fmt: skip


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
    assert plot_curves.task_end_plasticity(rows, 100, 2, "critic") == {"effective_rank": 84.0, "stable_rank": 50.0,
                                                                       "dormant_percent": 2.5}
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
    assert names == [f"{stem}_{kind}.png"
                     for kind in ("curves", "plasticity_box", "plasticity_evolution", "profile", "seeds")]
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


def png_text(path) -> dict:
    """The tEXt chunks of a PNG file (keyword -> text): where _save writes a figure's title and task labels."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, position = {}, 8
    while position < len(data):
        (length,), kind = struct.unpack(">I", data[position : position + 4]), data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"tEXt":
            keyword, _, text = body.partition(b"\0")
            chunks[keyword.decode("latin-1")] = text.decode("latin-1")
        position += 12 + length
    return chunks


PARALYSIS_LABELS = ["1", "0.75", "0.5", "0.25", "0", "0.25", "0.5", "0.75", "1"]  # Appendix B's torque levels


@pytest.mark.parametrize("paper_layout", [False, True])
def test_curves_are_titled_in_words_and_each_task_is_labelled(tmp_path, paper_layout):
    """The curves figure's title names the env, the setting and the seeds in words; above the axes each task's
    label (the paralysed joints' torque, the floor's friction) sits in the middle of its task; the legend lies
    within the figure's width under (or, in the paper's layout, inside) the axes, which keep their width."""
    setting = runlist.Setting("paralysis", "HalfCheetah", "back-one")
    for method in ("PPO", "EPPO_ind"):
        for seed in (1, 2, 3):
            write_run(runlist.run_dir(str(tmp_path), setting, method, seed), method=method, seed=seed, num_tasks=9,
                      schedule=nonstationary_envs.task_schedule("HalfCheetah-v5", "paralysis", "back-one"),
                      kappa=0.01 if method == "EPPO_ind" else None,
                      returns=lambda step, task, seed=seed: seed + step / 100)
    groups, _ = summarize.group_runs(summarize.load_runs(str(tmp_path)))
    cells = {m: [groups[(setting, m)][s] for s in (1, 2, 3)] for m in ("PPO", "EPPO_ind")}
    figure, title, labels = plot_curves.curves_figure(setting, cells, 2, paper_layout=paper_layout)
    axes = figure.axes[0]
    assert title == axes.get_title() == "HalfCheetah-v5, paralysis back-one (3 seeds)"
    assert labels == PARALYSIS_LABELS
    (top,) = axes.child_axes
    assert [tick.get_text() for tick in top.get_xticklabels()] == PARALYSIS_LABELS
    assert top.get_xticks().tolist() == [50 + 100 * i for i in range(9)]  # the middle of each 100-step task
    assert top.get_xlabel() == "task: torque of the paralysed joints"
    figure.canvas.draw()
    legend = axes.get_legend().get_window_extent()
    box = axes.get_window_extent()
    width = figure.bbox.width
    assert 0 <= legend.x0 and legend.x1 <= width  # not beside the axes, squeezing them
    assert ((box.contains(legend.x0, legend.y0) and box.contains(legend.x1, legend.y1)) if paper_layout
            else legend.y1 <= box.y0)
    assert box.width > 0.8 * width
    import matplotlib.pyplot as plt

    plt.close(figure)


def test_task_labels_of_each_experiment():
    schedule = ["(1.0, 1.0, 0.75, 1.0, 1.0, 1.0)", "(1.0, 1.0, 0.0, 1.0, 1.0, 1.0)"]
    assert plot_curves.task_labels("paralysis", schedule) == ("torque of the paralysed joints", ["0.75", "0"])
    assert plot_curves.task_labels("slippery", ["4.0", "3.75", 0.5]) == ("floor friction", ["4", "3.75", "0.5"])
    assert plot_curves.task_labels("none", ["None"]) == ("", [])
    assert plot_curves.setting_title(runlist.Setting("none", "Ant", "none"), [5, 8]) == "Ant-v5, stationary (5-8 seeds)"
    assert plot_curves.setting_title(SETTING, [1]) == "Ant-v5, slippery increasing (1 seed)"


def test_written_figures_carry_their_title_and_tasks_and_few_seeds_are_named(tmp_path):
    make_runs(tmp_path / "root")  # slippery increasing, 2 tasks, 2 seeds
    out = tmp_path / "plots"
    assert plot_curves.main([str(tmp_path / "root"), "--out", str(out), "--formats", "png"]) == 0
    curves = png_text(out / "slippery_Ant_increasing_curves.png")
    assert curves == {"Title": "Ant-v5, slippery increasing (2 seeds)", "Description": "tasks: 0.5, 0.75",
                      "Software": curves["Software"]}
    profile = png_text(out / "slippery_Ant_increasing_profile.png")
    assert profile["Title"].startswith("Ant-v5, slippery increasing (2 seeds): performance profiles")
    assert profile["Description"].startswith("Fewer than 5 seeds in a cell (the fewest: 2): "
                                             "these intervals mean little")


# The committed sample figures (docs/figures/) and the command that draws them from the committed study outputs.
SAMPLE_ROOTS = [os.path.join("studies", "2026-11-29_paper_length_v0.3_defaults", "outputs"),
                os.path.join("studies", "2026-12-01_paper_length_all_seven_methods", "outputs")]
SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "figures")


def test_the_committed_sample_figures_are_titled_and_labelled():
    """docs/figures/ holds one figure of each kind, HalfCheetah's at the paper's length (python
    scripts/plot_curves.py SAMPLE_ROOTS... --formats png, and --paper-layout for paper-layout/): their titles and
    task labels are what the command gives for those runs."""
    stem = "paralysis_HalfCheetah_back-one"
    title = "HalfCheetah-v5, paralysis back-one"
    kinds = {"curves": f"{title} (8 seeds)", "seeds": f"{title}: every seed",
             "profile": f"{title} (8 seeds): performance profiles",
             "plasticity_box": f"{title}: plasticity averaged over the task ends",
             "plasticity_evolution": f"{title}: plasticity over training"}  # fmt: skip
    for kind, start in kinds.items():
        assert png_text(os.path.join(SAMPLES, f"{stem}_{kind}.png"))["Title"].startswith(start), kind
    for path in (os.path.join(SAMPLES, f"{stem}_curves.png"),
                 os.path.join(SAMPLES, "paper-layout", f"{stem}_curves.png")):
        assert png_text(path)["Description"] == "tasks: " + ", ".join(PARALYSIS_LABELS)
    assert "Fewer than" not in png_text(os.path.join(SAMPLES, f"{stem}_profile.png"))["Description"]
    root = os.path.dirname(os.path.dirname(SAMPLES))
    runs = [run for sample_root in SAMPLE_ROOTS for run in summarize.load_runs(os.path.join(root, sample_root))]
    groups, _ = summarize.group_runs(runs)
    setting = runlist.Setting("paralysis", "HalfCheetah", "back-one")
    cells = {m: list(groups[(setting, m)].values())
             for m in summarize.method_order(m for s, m in groups if s == setting)}
    assert list(cells) == ["PPO", "PFO", "CB", "PPO_DRND", "EPPO_mean", "EPPO_cor", "EPPO_ind"]
    figure, drawn_title, labels = plot_curves.curves_figure(setting, cells, 0)
    assert drawn_title == kinds["curves"] and labels == PARALYSIS_LABELS
    import matplotlib.pyplot as plt

    plt.close(figure)
