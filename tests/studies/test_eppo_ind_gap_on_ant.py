"""The study "why our EPPO trails our PPO on Ant", studies/2026-11-29_eppo_ind_gap_on_ant/ (which chose v0.3's
reward normalization): analyze.py's walk, screen, kappa-grid and evidence tables from hand-made evaluation logs, its
scalars store, and its committed tables held to the README's commands; and its follow-up at the paper's length,
studies/2026-11-29_paper_length_v0.3_defaults/ (launch.sh, swamping.py, the committed tables)."""

import csv
import json
import importlib.util
import os

import numpy as np
import pytest
from scipy import stats

from fake_algorithm import write_launched_run
from tiny_run import REPO_ROOT

spec = importlib.util.spec_from_file_location("eppo_critic_analyze",
                                              os.path.join(REPO_ROOT, "studies", "2026-11-29_eppo_ind_gap_on_ant",
                                                           "analyze.py"))
analyze = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analyze)
spec = importlib.util.spec_from_file_location(
    "swamping", os.path.join(REPO_ROOT, "studies", "2026-11-29_paper_length_v0.3_defaults", "swamping.py"))
swamping = importlib.util.module_from_spec(spec)
spec.loader.exec_module(swamping)
spec = importlib.util.spec_from_file_location(
    "paper_length_compare", os.path.join(REPO_ROOT, "studies", "2026-11-27_paper_length_v0.2_defaults", "compare.py"))
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)
PAPER_LENGTH = os.path.join(REPO_ROOT, "studies", "2026-11-29_paper_length_v0.3_defaults")  # the follow-up

STEPS = [0, 250_000, 500_000, 750_000, 1_000_000]  # tasks 0, 0, 0, 1, 1


def write_config(root, name, levels: dict, last_step=1_000_000, scalars=None):
    """One configuration: each seed's evaluations at STEPS (up to last_step) return levels[seed] + step / 1e4."""
    for seed, level in levels.items():
        run_dir = root / name / f"seed{seed}"
        run_dir.mkdir(parents=True)
        with open(run_dir / "evaluations.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["global_step", "task", "episodes", "return_mean", "return_std", "return_min",
                             "return_max"])
            for step in (s for s in STEPS if s <= last_step):
                task = max(0, (step - 1) // 500_000)
                writer.writerow([step, task, 10, level + step / 1e4, 0, 0, 0])
        if scalars:
            analyze.scalars.write({(tag, step): value for tag, values in scalars.items() for step, value in values},
                                  str(run_dir / "scalars.csv.gz"))


def test_walk_table_rule_and_cut(tmp_path, capsys):
    write_config(tmp_path, "PPO", {1001: 1000, 1002: 1100, 1003: 900})
    write_config(tmp_path, "EPPO_mean", {1001: 700, 1002: 900, 1003: 650},
                 scalars={"evidential/nu_min": [(2048, 0.5), (4096, 1.5)]})
    write_config(tmp_path, "EPPO_ind", {1001: 600, 1002: 800, 1003: 700})
    write_config(tmp_path, "EPPO_ind+hp-algorithm1", {1001: 700, 1002: 900, 1003: 800})  # +100 on every seed
    write_config(tmp_path, "EPPO_ind+clip-none", {1001: 900, 1002: 700, 1003: 1000}, last_step=750_000)
    assert analyze.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # the cut: every configuration at the step all reached (750k), so each AULC is level + mean(0, 25, 50, 75)
    assert "up to step 750,000 (interim" in out
    rows, rule_rows = {}, {}  # a configuration's row in the first table, and its last row (the rule's table)
    for line in out.splitlines():
        if line.startswith("| "):
            rows.setdefault(line.split(" | ")[0].strip("| "), line)
            rule_rows[line.split(" | ")[0].strip("| ")] = line
    ppo = [1000 + 37.5, 1100 + 37.5, 900 + 37.5]
    assert f"| {np.mean(ppo):,.0f} ± {stats.sem(ppo):,.0f} |" in rows["PPO"]
    # EPPO_mean against PPO: the paper's one-sided paired t-test that it is lower
    p = stats.ttest_rel([1000, 1100, 900], [700, 900, 650], alternative="greater").pvalue
    assert rows["EPPO_mean"].endswith(f"| {p:.3f} |")
    # +100 on each seed over a mean of 737.5
    assert rule_rows["EPPO_ind+hp-algorithm1"].startswith("| EPPO_ind+hp-algorithm1 | yes | yes | +13.6% |")
    assert rule_rows["EPPO_ind+hp-algorithm1"].endswith("| yes | no |")  # better, but below PPO's mean
    assert rule_rows["EPPO_ind+clip-none"].startswith("| EPPO_ind+clip-none | no (evidence only) | no |")
    assert "| evidential/nu_min |" in out and "| 1 ± 0 |" in rows["evidential/nu_min"]  # mean(0.5, 1.5) = 1
    assert "| task 0 | task 1 |" in out


def test_only_some_configurations_are_cut_where_they_are(tmp_path, capsys):
    write_config(tmp_path, "PPO", {1001: 1000, 1002: 1100})
    write_config(tmp_path, "EPPO_mean", {1001: 700, 1002: 900}, last_step=250_000)
    assert analyze.main([str(tmp_path), "--only", "PPO"]) == 0
    out = capsys.readouterr().out
    assert "up to step 1,000,000" in out and "EPPO_mean" not in out


def test_an_empty_root_exits_2(tmp_path, capsys):
    assert analyze.main([str(tmp_path)]) == 2
    assert "no <configuration>/seed<k>/evaluations.csv" in capsys.readouterr().err


def write_events(run_dir, points: dict) -> None:
    """TensorBoard events in ``run_dir``: {tag: [(step, value), ...]}."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir))
    for tag, values in points.items():
        for step, value in values:
            writer.add_scalar(tag, value, step)
    writer.close()


def test_scalars_carried_from_an_earlier_machine_merge_under_the_runs_own_events(tmp_path):
    """scalars.py: the run's own TensorBoard points win where both have a step; the carried ones fill the steps the
    events lack (those of the earlier machines); only the kept tags are written."""
    scalars = analyze.scalars
    run_dir = tmp_path / "seed1001"
    run_dir.mkdir()
    scalars.write({("evidential/nu", 0): 5.0, ("evidential/nu", 10): 6.0}, str(run_dir / scalars.CARRIED))
    write_events(run_dir, {"evidential/nu": [(10, 1.5), (20, 2.5)], "charts/SPS": [(10, 100.0)]})  # SPS: not kept
    assert scalars.main([str(run_dir), str(tmp_path / "out.csv")]) == 0
    assert scalars.read_csv(str(tmp_path / "out.csv")) == {("evidential/nu", 0): 5.0, ("evidential/nu", 10): 1.5,
                                                          ("evidential/nu", 20): 2.5}
    assert analyze.read_scalars(str(run_dir))["evidential/nu"] == [(0, 5.0), (10, 1.5), (20, 2.5)]
    # --tags: these tags alone, from the events and from the carried scalars alike
    scalars.write({("evidential/nu", 0): 5.0, ("evidential/alpha", 0): 3.0}, str(run_dir / scalars.CARRIED))
    assert scalars.main([str(run_dir), str(tmp_path / "some.csv"), "--tags", "evidential/alpha,charts/SPS"]) == 0
    assert scalars.read_csv(str(tmp_path / "some.csv")) == {("evidential/alpha", 0): 3.0, ("charts/SPS", 10): 100.0}
    assert scalars.main([str(run_dir), str(tmp_path / "some.csv"), "--tags"]) == 2


def test_scalars_store_modes_carry_a_runs_scalars_from_one_machine_to_the_next(tmp_path, capsys):
    """scalars.py --stash / --restore / --collect: a run's scalars stashed beside its resume point on one machine, put
    back on a fresh one, and collected there with the new machine's events, lose no point; --runs and --tags select."""
    scalars = analyze.scalars
    eppo, ppo, check = "paralysis/Ant/EPPO_ind/seed1", "paralysis/Ant/PPO/seed1", "checks/a/b/EPPO_ind/seed2"
    machine_a, store = tmp_path / "a", tmp_path / "store"
    for run in (eppo, ppo, check):
        (machine_a / run).mkdir(parents=True)
        (machine_a / run / "config.json").write_text("{}")
        (store / run).mkdir(parents=True)
        (store / run / "checkpoint.pt").write_text("")  # what --stash looks for (resume_store.py wrote it)
        write_events(machine_a / run, {"evidential/nu_min": [(10, 1.0), (20, 2.0)], "charts/SPS": [(10, 9.0)]})
    # machine A: only the EPPO_ind runs, only the tag asked for (the nested check run too: any depth)
    assert scalars.main(["--stash", str(machine_a), str(store), "--tags", "evidential/nu_min",
                         "--runs", "*/EPPO_ind/seed*"]) == 0
    assert "scalars of 2 resume points stashed" in capsys.readouterr().out
    assert not (store / ppo / "scalars.csv.gz").exists()
    stashed = {("evidential/nu_min", 10): 1.0, ("evidential/nu_min", 20): 2.0}
    assert scalars.read_csv(str(store / eppo / "scalars.csv.gz")) == stashed
    assert scalars.read_csv(str(store / check / "scalars.csv.gz")) == stashed
    # machine B, fresh: the launch restored the EPPO run's resume point alone (no events); an older carried CSV of a
    # machine before A is replaced, since the store's holds all it held
    machine_b = tmp_path / "b"
    (machine_b / eppo).mkdir(parents=True)
    scalars.write({("evidential/nu_min", 10): 1.0}, str(machine_b / eppo / scalars.CARRIED))
    assert scalars.main(["--restore", str(machine_b), str(store)]) == 0
    assert "scalars of 1 runs restored" in capsys.readouterr().out  # the check run has no directory on B
    assert scalars.read_csv(str(machine_b / eppo / scalars.CARRIED)) == stashed
    # the run resumes at step 20 on B: its own events win where both have a step
    write_events(machine_b / eppo, {"evidential/nu_min": [(20, 2.0), (30, 3.0)]})
    (machine_b / eppo / "config.json").write_text("{}")
    assert scalars.main(["--collect", str(machine_b), str(tmp_path / "outputs"), "--tags", "evidential/nu_min"]) == 0
    assert scalars.read_csv(str(tmp_path / "outputs" / eppo / "scalars.csv.gz")) == {**stashed,
                                                                                    ("evidential/nu_min", 30): 3.0}
    # without --tags: the kept prefixes (evidential/, ...), not charts/SPS
    assert scalars.main(["--collect", str(machine_a), str(tmp_path / "all"), "--runs", ppo]) == 0
    assert scalars.read_csv(str(tmp_path / "all" / ppo / "scalars.csv.gz")) == stashed
    assert not (tmp_path / "all" / eppo).exists()


def test_the_v03_paper_length_launcher_carries_the_eppo_runs_scalars_with_the_paper_length_launchers_outputs(tmp_path):
    """studies/2026-11-29_paper_length_v0.3_defaults/launch.sh on a hand-made root (nothing trains): --collect and
    --stash do what studies/2026-11-26_paper_length_v0.1_defaults/launch.sh does, plus the EPPO_ind runs' scalars of
    its three tags (PPO's none); a bad flag exits 2 with the usage before any scalars are touched."""
    import subprocess

    root, outputs, store = tmp_path / "root", tmp_path / "outputs", tmp_path / "store"
    setting = root / "runs" / "paralysis" / "Ant" / "back-one"
    tags = ("evidential/advantage_max_z", "evidential/value_var_max", "evidential/nu_min")
    for method in ("PPO", "EPPO_ind"):
        run_dir = setting / method / "seed1"
        write_launched_run(str(run_dir), method=method, finished=False, drop_steps=(150, 200))
        write_events(run_dir, {**{tag: [(50, 1.0), (100, 2.0)] for tag in tags}, "evidential/nu": [(50, 3.0)]})
    env = {**os.environ, "EPPO_CRITIC_PAPER_LENGTH_ROOT": str(root), "EPPO_CRITIC_PAPER_LENGTH_OUTPUTS": str(outputs),
           "EPPO_CRITIC_PAPER_LENGTH_STORE": str(store)}

    def launch(*flags):
        return subprocess.run(["bash", os.path.join(PAPER_LENGTH, "launch.sh"), *flags], env=env,
                              capture_output=True, text=True, timeout=120)

    kept = {(tag, step): value for tag in tags for step, value in ((50, 1.0), (100, 2.0))}
    for mode, directory in (("--collect", outputs), ("--stash", store)):
        result = launch(mode)
        assert result.returncode == 0, result.stderr
        eppo, ppo = (directory / "paralysis" / "Ant" / "back-one" / method / "seed1" for method in ("EPPO_ind", "PPO"))
        assert analyze.scalars.read_csv(str(eppo / "scalars.csv.gz")) == kept, mode
        assert not (ppo / "scalars.csv.gz").exists(), mode
        if mode == "--collect":
            assert sorted(os.listdir(ppo)) == ["config.json", "evaluations.csv", "plasticity.csv"]
        else:  # the resume point, as resume_store.py stashes it
            assert "EPPO_ind/seed1: checkpoint at 100 stashed" in result.stdout
            assert (ppo / "checkpoint.pt").exists() and (eppo / "checkpoint.pt").exists()
    bad = launch("--satus")
    assert bad.returncode == 2 and "usage:" in bad.stderr and "scalars" not in bad.stdout


@pytest.mark.parametrize("argv, message", [
    (["--restore", "runs", "store", "--tags", "evidential/nu_min"], "--tags does not go with --restore"),
    (["--restore", "runs", "store", "--runs", "*"], "--runs does not go with --restore"),
    (["run", "out.csv.gz", "--runs", "*"], "--runs goes with --collect or --stash"),
    (["run", "out.csv.gz", "--tags", ","], "--tags needs at least one tag"),
    (["--stash", "--restore", "runs", "store"], "not allowed with argument"),
    (["--stash", "runs"], "the following arguments are required"),
])
def test_scalars_bad_arguments_exit_2_and_say_why(argv, message, capsys):
    assert analyze.scalars.main(argv) == 2
    assert message in capsys.readouterr().err


def pipeline_check_output(tmp_path, capsys, monkeypatch, ant_levels: dict, norm_reward_levels: dict) -> str:
    """The checks' section for hand-made logs: the Ant check to 500k, both HalfCheetah lines to 1 M."""
    write_config(tmp_path, "PPO", {1001: 1000, 1002: 1100, 1003: 900})
    write_config(tmp_path, analyze.ANT_CHECK, ant_levels, last_step=500_000)
    write_config(tmp_path, os.path.join(analyze.HALFCHEETAH_CHECK, "PPO"), {1001: 1000, 1002: 1100, 1003: 900})
    write_config(tmp_path, os.path.join(analyze.HALFCHEETAH_CHECK, "PPO+norm-reward"), norm_reward_levels)
    monkeypatch.setattr(analyze, "standing_still_returns", lambda seeds: {1001: 950, 1002: 1000, 1003: 1000})
    assert analyze.main([str(tmp_path)]) == 0
    assert "pipeline checks" not in capsys.readouterr().out  # they bear on a --norm-reward line, and none is here
    write_config(tmp_path, "PPO+norm-reward", {1001: 1050, 1002: 1150, 1003: 950})
    assert analyze.main([str(tmp_path)]) == 0
    section = capsys.readouterr().out.split("#### The pipeline checks")[1]
    return "\n".join(" ".join(paragraph.split("\n")) for paragraph in section.split("\n\n"))  # its paragraphs unwrapped


def test_pipeline_checks_pass(tmp_path, capsys, monkeypatch):
    # evaluations level + 0, 25, 50 at 0, 250k, 500k: 1001 is above 950 from 250k, 1002 above 1000 from 250k (step 0
    # does not count, 1002's 1,000 there is not above), 1003 never; HalfCheetah: norm-reward higher on every seed
    out = pipeline_check_output(tmp_path, capsys, monkeypatch, {1001: 940, 1002: 1000, 1003: 500},
                                {1001: 1100, 1002: 1150, 1003: 1000})
    assert ("seed 1001: 250,000 (standing still 950), seed 1002: 250,000 (standing still 1,000), seed 1003: never "
            "(standing still 1,000); 2 of 3 seeds walk within 500,000: **passes**") in out
    # 1001: 965, 990 above 950; 1002: 1,025, 1,050 above 1,000; 1003 never; at 500k: 990, 1,050, 550
    assert "Evaluations above standing still: 4 of 6; return at step 500,000: 863 ± 158" in out
    assert "| PPO+norm-reward | 1,133 ± 44 | 1,150, 1,200, 1,050 |" in out  # level + mean(0, 25, 50, 75, 100)
    p = stats.ttest_rel([1000, 1100, 900], [1100, 1150, 1000], alternative="greater").pvalue
    assert p > 0.05 and f"= {p:.3f}: **passes**" in out


def test_pipeline_checks_fail(tmp_path, capsys, monkeypatch):
    # one seed walks; HalfCheetah lower by 100, 200, 150: the paired one-sided p is that of t = 150 / (50 / sqrt 3)
    out = pipeline_check_output(tmp_path, capsys, monkeypatch, {1001: 940, 1002: 900, 1003: 500},
                                {1001: 900, 1002: 900, 1003: 750})
    assert "1 of 3 seeds walk within 500,000: **fails**" in out
    p = stats.ttest_rel([1000, 1100, 900], [900, 900, 750], alternative="greater").pvalue
    assert p < 0.05 and f"= {p:.3f}: **fails**" in out


def test_the_kappa_grid_picks_the_highest_mean_aulc_once_every_line_has_finished(tmp_path, capsys, monkeypatch):
    """The paper's rule (Appendix B): kappa by the highest mean AULC; an unfinished grid picks nothing."""
    write_config(tmp_path, "EPPO_ind+norm-reward", {1001: 1000, 1002: 1100, 1003: 900})
    write_config(tmp_path, "EPPO_ind+norm-reward_kappa0.05", {1001: 1300, 1002: 900, 1003: 1000})  # mean 1,066.7
    assert analyze.main([str(tmp_path)]) == 0
    assert "Interim: kappa 0.05 leads" in capsys.readouterr().out  # two of the three lines
    write_config(tmp_path, "EPPO_ind+norm-reward_kappa0.1", {1001: 1050, 1002: 1130, 1003: 960})  # mean 1,046.7
    monkeypatch.setattr(analyze, "STEPS_PER_TASK", 200_000)  # the hand-made runs' 1 M steps as the 5 tasks
    assert analyze.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "The grid picks **kappa 0.05**" in out
    row = next(line for line in out.splitlines() if line.startswith("| 0.1 |"))
    # each AULC is level + 50 (the mean of step / 1e4 over 0..1 M); the p: kappa 0.1 above 0.01 by 50, 30, 60
    p = stats.ttest_rel([1050, 1130, 960], [1000, 1100, 900], alternative="greater").pvalue
    assert "| 1,100, 1,180, 1,010 |" in row and row.endswith(f"| {p:.3f} |")


def test_the_evidence_at_the_new_default_compares_each_line_with_its_one_flag_base(tmp_path, capsys):
    """After the paper-length runs at v0.3's default: clip-none at the new default against EPPO_ind+norm-reward
    (paired by seed) and PPO+norm-reward."""
    write_config(tmp_path, "EPPO_ind+norm-reward", {1001: 1000, 1002: 1100, 1003: 900})
    write_config(tmp_path, "EPPO_ind+norm-reward+clip-none", {1001: 1100, 1002: 1150, 1003: 1100})
    write_config(tmp_path, "PPO+norm-reward", {1001: 1200, 1002: 1000, 1003: 1000})
    assert analyze.main([str(tmp_path), "--only", "EPPO_ind+norm-reward,PPO+norm-reward"]) == 0
    assert "Evidence at the new default" not in capsys.readouterr().out  # no line without its base, and v.v.
    assert analyze.main([str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| EPPO_ind+norm-reward+clip-none | EPPO_ind+norm-reward |"))
    # every AULC is level + 50, so the gain is 350 / 3,150 and the tests are on the levels
    p_base = stats.ttest_rel([1100, 1150, 1100], [1000, 1100, 900], alternative="greater").pvalue
    p_ppo = stats.ttest_rel([1100, 1150, 1100], [1200, 1000, 1000], alternative="greater").pvalue
    assert row == (f"| EPPO_ind+norm-reward+clip-none | EPPO_ind+norm-reward | yes | +11.1% | {p_base:.3f} "
                   f"| {p_ppo:.3f} |")


def test_swamping_counts_the_updates_where_one_state_holds_half_the_normalized_spread(tmp_path, capsys):
    """studies/2026-11-29_paper_length_v0.3_defaults/swamping.py: z^2 / (N - 1) >= 0.5 marks an update; per task, mean
    ± se over seeds of the median z, that share, and the median largest var[V] (N = 100 here: z >= 7.04 is swamped)."""
    setting = tmp_path / "paralysis" / "Ant" / "back-one" / "EPPO_ind"
    zs = {1: ([4.0, 8.0, 9.0, 3.0], [3.0, 3.0, 3.0, 9.9]), 2: ([4.0, 4.0, 4.0, 4.0], [7.0, 7.1, 3.0, 5.0])}
    for seed, (task0, task1) in zs.items():
        run_dir = setting / f"seed{seed}"
        run_dir.mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps(
            {"args": {"num_steps": 50, "num_envs": 2, "steps_per_task": 400}}))
        logged = {("evidential/advantage_max_z", 100 * (i + 1)): z for i, z in enumerate(task0 + task1)}
        logged.update({("evidential/value_var_max", 100 * (i + 1)): 10.0 * seed for i in range(8)})
        analyze.scalars.write(logged, str(run_dir / "scalars.csv.gz"))
    assert swamping.main(["paralysis/Ant/back-one", "--outputs", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 0 ") or line.startswith("| 1 ")]
    # task 0: medians 6.0 and 4.0, swamped 2/4 and 0/4; task 1: medians 3.0 and 6.0, swamped 1/4 each (seed 2: 7.1
    # only, as 7.0^2 / 99 < 0.5 <= 7.1^2 / 99); var[V] 10 and 20
    assert rows[0] == "| 0 | 2 | 5.0 ± 1.0 | 25.0% ± 25.0% | 15 ± 5 |"
    assert rows[1] == "| 1 | 2 | 4.5 ± 1.5 | 25.0% ± 0.0% | 15 ± 5 |"
    assert swamping.main(["paralysis/HalfCheetah/back-one", "--outputs", str(tmp_path)]) == 2
    # --seeds: those seeds alone (seed 2's medians 4.0 and 6.0); a seed with no scalars is named, a bad range refused
    assert swamping.main(["paralysis/Ant/back-one", "--outputs", str(tmp_path), "--seeds", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 0 ") or line.startswith("| 1 ")]
    assert rows == ["| 0 | 1 | 4.0 ± nan | 0.0% ± nan% | 20 ± nan |", "| 1 | 1 | 6.0 ± nan | 25.0% ± nan% | 20 ± nan |"]
    assert swamping.main(["paralysis/Ant/back-one", "--outputs", str(tmp_path), "--seeds", "3"]) == 2
    assert "for seeds 3" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:
        swamping.main(["paralysis/Ant/back-one", "--seeds", "x"])
    assert bad.value.code == 2 and "argument --seeds: invalid --seeds 'x'" in capsys.readouterr().err


@pytest.mark.parametrize("tables, only", [
    ("walk_tables.md", "PPO,EPPO_mse_mean,EPPO_mean,EPPO_ind"),
    ("screen_tables.md", "PPO,EPPO_mean,EPPO_ind,EPPO_ind+hp-algorithm1,EPPO_ind+norm-reward,PPO+norm-reward"),
    ("kappa_tables.md", "EPPO_ind,EPPO_ind+norm-reward,EPPO_ind+norm-reward_kappa0.05,EPPO_ind+norm-reward_kappa0.1,"
                        "PPO,PPO+norm-reward"),
    ("evidence_tables.md", "PPO,EPPO_mse_mean,EPPO_mean,EPPO_ind,EPPO_ind+clip-none,EPPO_ind+nll-mse-omega"),
    ("clip_new_default_tables.md", "EPPO_ind,EPPO_ind+norm-reward,EPPO_ind+norm-reward+clip-none,PPO+norm-reward")])
def test_the_committed_tables_are_what_the_readme_commands_print_from_the_committed_outputs(tables, only, capsys):
    """The study's tables are recomputable: analyze.py --only (the README's commands) on
    studies/2026-11-29_eppo_ind_gap_on_ant/outputs."""
    assert analyze.main([os.path.join(REPO_ROOT, "studies", "2026-11-29_eppo_ind_gap_on_ant", "outputs"),
                         "--only", only]) == 0
    with open(os.path.join(REPO_ROOT, "studies", "2026-11-29_eppo_ind_gap_on_ant", tables)) as f:
        assert capsys.readouterr().out == f.read()


@pytest.mark.parametrize("setting, name", [("paralysis/Ant/back-one", "ant"),
                                           ("paralysis/HalfCheetah/back-one", "halfcheetah")])
def test_the_committed_paper_length_tables_are_what_its_readme_commands_print(setting, name, tmp_path, capsys):
    """studies/2026-11-29_paper_length_v0.3_defaults's tables (compare.py, new = that study's outputs, old =
    v0.2's, studies/2026-11-27_paper_length_v0.2_defaults) and its swamping table are recomputable: the README's
    commands on the committed outputs print them exactly."""
    assert compare.main([setting, "--new", os.path.join(PAPER_LENGTH, "outputs"), "--old",
                         os.path.join(REPO_ROOT, "studies", "2026-11-27_paper_length_v0.2_defaults", "outputs"),
                         "--plot", str(tmp_path / f"{name}.png")]) == 0
    with open(os.path.join(PAPER_LENGTH, f"{name}_tables.md")) as f:
        assert capsys.readouterr().out == f.read()
    assert swamping.main([setting]) == 0
    with open(os.path.join(PAPER_LENGTH, f"{name}_swamping.md")) as f:
        assert capsys.readouterr().out == f.read()
