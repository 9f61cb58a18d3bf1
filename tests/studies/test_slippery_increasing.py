"""The study "slippery `increasing` at the paper's length", studies/2026-12-07_slippery_increasing/: analyze.py on the
real outputs of its smoke runs against numpy and scipy, the reading's patterns on hand-made verdicts, the launcher's
runs (the paper's protocol and κ, every seed once, the order the README gives), and the committed tables held to the
README's commands."""

import csv
import importlib.util
import json
import os
import subprocess

import numpy as np
import pytest
from scipy import stats

from fake_algorithm import write_run
from tiny_run import REPO_ROOT

STUDY = os.path.join(REPO_ROOT, "studies", "2026-12-07_slippery_increasing")
SMOKE = os.path.join(STUDY, "smoke")
spec = importlib.util.spec_from_file_location("slippery_increasing_analyze", os.path.join(STUDY, "analyze.py"))
analyze = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analyze)
SETTINGS = {"Ant": "slippery/Ant/increasing", "HalfCheetah": "slippery/HalfCheetah/increasing"}


def read_paper_kappa() -> dict:
    with open(os.path.join(REPO_ROOT, "scripts", "paper_kappa.csv"), newline="") as f:
        return {(row["experiment"], row["env"], row["strategy"]): {"EPPO_cor": float(row["kappa_cor"]),
                                                                 "EPPO_ind": float(row["kappa_ind"])}
                for row in csv.DictReader(f)}


def smoke_aulc_by_hand(setting: str) -> dict:
    """method -> seed -> (AULC, [AULC of each task]) straight from evaluations.csv with numpy."""
    found = {}
    for method in analyze.METHODS:
        directory = os.path.join(SMOKE, "outputs", setting, method)
        for name in sorted(os.listdir(directory)):
            rows = list(csv.DictReader(open(os.path.join(directory, name, "evaluations.csv"))))
            returns = np.array([float(r["return_mean"]) for r in rows])
            tasks = np.array([int(r["task"]) for r in rows])
            found.setdefault(method, {})[int(name.removeprefix("seed"))] = (
                float(returns.mean()), [float(returns[tasks == t].mean()) for t in sorted(set(tasks))])
    return found


@pytest.mark.parametrize("env", ["Ant", "HalfCheetah"])
def test_the_smoke_runs_tables_are_what_numpy_and_scipy_compute(env, capsys):
    """The real smoke outputs (5 seeds, 3 tasks of 2,048 steps; README.md, "Smoke runs"): every run records the
    paper's κ for its setting and the `floor` mode; the level is scipy's Welch test against the paper's mean ± se
    over 15 seeds; each variant against PPO, overall and per task, scipy's paired one-sided test."""
    setting = SETTINGS[env]
    assert analyze.main([setting, "--root", os.path.join(SMOKE, "outputs")]) == 0
    out = capsys.readouterr().out
    kappa = read_paper_kappa()[("slippery", env, "increasing")]
    assert f"- EPPO_cor: seeds [1, 2, 3, 4, 5], commit 8c9228c, κ {kappa['EPPO_cor']:g}, friction mode floor" in out
    assert f"- EPPO_ind: seeds [1, 2, 3, 4, 5], commit 8c9228c, κ {kappa['EPPO_ind']:g}, friction mode floor" in out
    assert "- EPPO_mean: seeds [1, 2, 3, 4, 5], commit 8c9228c, κ 0, friction mode floor" in out
    assert "**Interim**" in out and "The reading" not in out

    by_hand = smoke_aulc_by_hand(setting)
    runs = analyze.load(analyze.runlist.Setting(*setting.split("/")), os.path.join(SMOKE, "outputs"))
    assert {m: sorted(by_seed) for m, by_seed in runs.items()} == {m: [1, 2, 3, 4, 5] for m in analyze.METHODS}
    aulc = analyze.seven.metric_values(runs, "aulc")
    paper = analyze.summarize.read_paper_results()
    for method in analyze.METHODS:
        ours = [by_hand[method][s][0] for s in range(1, 6)]
        assert [aulc[method][s] for s in range(1, 6)] == pytest.approx(ours, rel=1e-12)
        mean, se = paper[("aulc", analyze.runlist.Setting("slippery", env, "increasing"), method)]
        welch = stats.ttest_ind_from_stats(np.mean(ours), np.std(ours, ddof=1), 5, mean, se * np.sqrt(15), 15,
                                           equal_var=False)
        assert analyze.paper_length.against_paper(ours, mean, se) == pytest.approx(welch.pvalue, rel=1e-9)
    rows = analyze.against_ppo(aulc)
    ppo = [by_hand["PPO"][s][0] for s in range(1, 6)]
    for variant in analyze.EPPO_VARIANTS:
        ours = [by_hand[variant][s][0] for s in range(1, 6)]
        above, below, verdict = rows[variant]
        assert above == pytest.approx(stats.ttest_rel(ours, ppo, alternative="greater").pvalue, rel=1e-9)
        assert below == pytest.approx(stats.ttest_rel(ours, ppo, alternative="less").pvalue, rel=1e-9)
        assert verdict == ("above" if above < 0.05 else "below" if below < 0.05 else "level")
    equal_tasks = 0
    for task, values in enumerate(analyze.task_values(runs)):
        for variant, (above, _, _) in analyze.against_ppo(values).items():
            ours, base = ([by_hand[m][s][1][task] for s in range(1, 6)] for m in (variant, "PPO"))
            if ours == base:  # before the first update every method evaluates the same initial policy of each seed
                equal_tasks += 1
                assert above == 1.0  # scripts/summarize.py's p of equal pairs (scipy's t is 0/0 there)
                continue
            assert above == pytest.approx(stats.ttest_rel(ours, base, alternative="greater").pvalue, rel=1e-9)
    assert equal_tasks < 3 * len(analyze.EPPO_VARIANTS)  # the scipy branch ran


@pytest.mark.parametrize("env, tables", [("Ant", "ant_tables.md"), ("HalfCheetah", "halfcheetah_tables.md")])
def test_the_committed_smoke_tables_are_what_the_readmes_command_prints(env, tables, capsys):
    assert analyze.main([SETTINGS[env], "--root", os.path.join(SMOKE, "outputs"), "--cost"]) == 0
    with open(os.path.join(SMOKE, tables)) as f:
        assert capsys.readouterr().out == f.read()


@pytest.mark.parametrize("env, tables", [("Ant", "ant_tables.md"), ("HalfCheetah", "halfcheetah_tables.md")])
def test_the_committed_tables_are_what_the_readmes_command_prints(env, tables, capsys):
    """Each setting's committed tables (interim at 5 seeds, then final at 8) equal the README's command."""
    if not os.path.isdir(os.path.join(STUDY, "outputs", SETTINGS[env])):
        pytest.skip(f"no outputs of {SETTINGS[env]} committed yet: the study's runs have not been collected")
    with open(os.path.join(STUDY, tables)) as f:
        committed = f.read()
    kept = committed.split("\nOnly seeds ", 1)[1].split(" ", 1)[0] if "\nOnly seeds " in committed else None
    seeds = ["--seeds", kept] if kept else []
    assert analyze.main([SETTINGS[env], "--cost", *seeds]) == 0
    assert capsys.readouterr().out == committed


def test_each_variant_against_ppo_is_the_papers_one_sided_paired_test_both_ways():
    rng = np.random.default_rng(3)
    base = rng.normal(2000, 300, 8)
    values = {"PPO": dict(enumerate(base, 1)), "EPPO_mean": dict(enumerate(base + rng.normal(0, 50, 8), 1)),
              "EPPO_cor": dict(enumerate(base + 400 + rng.normal(0, 50, 8), 1)),
              "EPPO_ind": dict(enumerate(base - 400 + rng.normal(0, 50, 8), 1))}
    rows = analyze.against_ppo(values)
    for variant in analyze.EPPO_VARIANTS:
        a, b = [values[variant][s] for s in range(1, 9)], list(base)
        assert rows[variant][0] == pytest.approx(stats.ttest_rel(a, b, alternative="greater").pvalue, rel=1e-12)
        assert rows[variant][1] == pytest.approx(stats.ttest_rel(b, a, alternative="greater").pvalue, rel=1e-12)
    assert [rows[m][2] for m in analyze.EPPO_VARIANTS] == ["level", "above", "below"]


@pytest.mark.parametrize("verdicts, expected", [
    (("level", "above", "above"), "A1, it carries over: EPPO_cor and EPPO_ind above our PPO; EPPO_mean level with it, "
                                  "back-one's split"),
    (("above", "above", "above"), "A1, it carries over: EPPO_cor and EPPO_ind above our PPO; EPPO_mean above it too, "
                                  "the critic alone lifts HalfCheetah here"),
    (("level", "level", "level"), "A2, it does not carry over: neither EPPO_cor nor EPPO_ind above our PPO"),
    (("below", "level", "below"), "A2, it does not carry over: neither EPPO_cor nor EPPO_ind above our PPO; below our "
                                  "PPO: EPPO_mean, EPPO_ind"),
    (("level", "level", "above"), "A3, partly: EPPO_ind above our PPO, EPPO_cor level"),
])
def test_question_a_names_the_first_pattern_that_holds(verdicts, expected):
    assert analyze.reading_a(dict(zip(analyze.EPPO_VARIANTS, verdicts))) == expected


@pytest.mark.parametrize("verdicts, levels, expected", [
    (("level",) * 3, ("at", "below", "below", "below"),
     "B1, it carries over: all three EPPO variants level with our PPO; with our PPO at the paper's level and the three "
     "below theirs, back-one's picture whole"),
    (("level",) * 3, ("at", "at", "below", "below"),
     "B1, it carries over: all three EPPO variants level with our PPO; our PPO at the paper's level, the variants "
     "EPPO_mean at, EPPO_cor below, EPPO_ind below"),
    (("level", "above", "level"), ("at",) * 4,
     "B2, it does not carry over, EPPO helps on Ant here: EPPO_cor above our PPO"),
    (("below", "level", "level"), ("at",) * 4,
     "B3, it does not carry over, EPPO costs on Ant here: EPPO_mean below our PPO"),
    (("below", "above", "level"), ("at",) * 4, "B4, mixed: EPPO_cor above our PPO, EPPO_mean below it"),
])
def test_question_b_names_the_first_pattern_that_holds(verdicts, levels, expected):
    levels = {m: (0.5, level) for m, level in zip(analyze.METHODS, levels)}
    assert analyze.reading_b(dict(zip(analyze.EPPO_VARIANTS, verdicts)), levels) == expected


@pytest.mark.parametrize("level, expected", [("above", "C1, above here too"), ("at", "C2, at the paper's level"),
                                             ("below", "C3, below")])
def test_question_c_reads_our_ppos_level(level, expected):
    levels = {"PPO": (0.0123, level), "EPPO_mean": (0.2, "at"), "EPPO_cor": (0.0, "above"), "EPPO_ind": (0.0, "below")}
    assert analyze.reading_c(levels) == (f"{expected}: our PPO {level} the paper's (Welch p 0.012); EPPO_mean at, "
                                         "EPPO_cor above, EPPO_ind below")


def test_the_reading_is_applied_once_every_method_has_its_8_seeds(tmp_path, capsys):
    """Hand-made finished runs of 8 seeds: the reading is printed (A and C on HalfCheetah, B on Ant); with --seeds 1-5
    the same runs are interim and it is not."""
    root = tmp_path / "outputs"
    for env in ("Ant", "HalfCheetah"):
        for i, method in enumerate(analyze.METHODS):
            for seed in range(1, 9):
                write_run(str(root / "slippery" / env / "increasing" / method / f"seed{seed}"), method=method,
                          env_id=f"{env}-v5", experiment="slippery", strategy="increasing", seed=seed,
                          steps_per_task=100, num_tasks=15, eval_frequency=50,
                          kappa={"EPPO_mean": 0.0}.get(method, 0.1 if i else None),
                          returns=lambda step, task, i=i, seed=seed: 5000.0 + 100.0 * i + seed * (1 + i / 10))
    assert analyze.main([SETTINGS["HalfCheetah"], "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "\nA1, it carries over: EPPO_cor and EPPO_ind above our PPO; EPPO_mean above it too" in out
    assert "\nC1, above here too: our PPO above the paper's" in out and "B1" not in out
    assert analyze.main([SETTINGS["Ant"], "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "\nB2, it does not carry over, EPPO helps on Ant here: EPPO_mean, EPPO_cor, EPPO_ind above our PPO." in out
    assert "### Tasks 0-2, one physics (floors up to the body's friction 1), and the rest" in out
    assert analyze.main([SETTINGS["Ant"], "--root", str(root), "--seeds", "1-5"]) == 0
    out = capsys.readouterr().out
    assert "**Interim**" in out and "The reading" not in out and "seeds [1, 2, 3, 4, 5]" in out


@pytest.mark.parametrize("env", ["Ant", "HalfCheetah"])
def test_the_one_physics_tasks_are_the_floors_at_or_below_every_body_geoms_friction(env):
    """BODY_FRICTION is the models' own: every geom but the floor has that sliding friction, so in `floor` mode a
    floor at or below it gives the same contacts (docs/environments.md; the bit-identity itself:
    tests/modules/test_nonstationary_envs.py). Ant: tasks 0-2 (0.5, 0.75, 1.0); HalfCheetah: none."""
    import gymnasium as gym

    model = gym.make(f"{env}-v5").unwrapped.model
    floor = model.geom("floor").id
    body = [model.geom_friction[g, 0] for g in range(model.ngeom) if g != floor]
    assert set(body) == {analyze.BODY_FRICTION[env]}
    setting = analyze.runlist.Setting(*SETTINGS[env].split("/"))
    assert analyze.one_physics_tasks(setting) == ([0, 1, 2] if env == "Ant" else [])


def launch_text() -> str:
    with open(os.path.join(STUDY, "launch.sh")) as f:
        return f.read()


def test_the_launcher_runs_every_seed_once_at_the_papers_protocol_and_kappa_halfcheetah_first():
    """launch.sh's phases, read from its text, through scripts/runlist.py: every (setting, method, seed 1-8) once, the
    5-seed processes of both settings before the 3-seed ones, HalfCheetah's before Ant's in each; EPPO_cor and
    EPPO_ind at the paper's κ for the setting, EPPO_mean at 0; no flag that moves the protocol off the scripts'
    defaults, which are the paper's (15 tasks of 500k steps, 10 episodes every 20k, the `floor` mode)."""
    import eppo_continuous
    import ppo_continuous
    from scripts import runlist

    text = launch_text()
    methods = text.split("export PAPER_LENGTH_METHODS=", 1)[1].split()[0].split(",")
    assert methods == list(analyze.METHODS)
    both = runlist.select_settings(settings=text.split("\nBOTH=", 1)[1].split()[0])
    assert [s.env for s in both] == ["HalfCheetah", "Ant"]
    phases = [p.split() for p in text.split('export PAPER_LENGTH_PHASES="', 1)[1].split('"')[0].split(";")]
    assert [p[1:] for p in phases] == [["1-5", "5"], ["6-8", "3"]] and all(p[0] == "$BOTH" for p in phases)
    runs = [run for _, seeds, per_process in phases
            for run in runlist.build_runs(methods, both, runlist.parse_seeds(seeds), "/runs",
                                          seeds_per_process=int(per_process), extra_args=("--torch-threads", "1"))]
    kappa = read_paper_kappa()
    covered = []
    for run in runs:
        argv = list(run.argv)
        flag = dict(zip(argv[2::2], argv[3::2]))  # after python3 and the script, flags and values alternate
        env = flag["--env-id"].removesuffix("-v5")
        method = run.run_dir.split("/")[-2]
        first, count = int(flag["--seed"]), int(flag["--num-seeds"])
        covered += [(env, method, seed) for seed in range(first, first + count)]
        assert flag["--experiment"] == "slippery" and flag["--strategy"] == "increasing"
        paper_kappa = kappa.get(("slippery", env, "increasing"), {}).get(method)
        expected_kappa = {"PPO": None, "EPPO_mean": 0.0}.get(method, paper_kappa)
        assert (float(flag["--kappa"]) if "--kappa" in flag else None) == expected_kappa, run.command
        assert set(flag) <= {"--env-id", "--experiment", "--strategy", "--variant", "--kappa", "--seed", "--num-seeds",
                             "--run-dir", "--torch-threads"}, run.command
    assert sorted(covered) == sorted((e, m, s) for e in ("Ant", "HalfCheetah") for m in methods for s in range(1, 9))
    one_sweep = runlist.build_runs(methods, both, list(range(1, 9)), "/runs", seeds_per_process=5,
                                   extra_args=("--torch-threads", "1"))
    assert sorted(run.argv for run in runs) == sorted(run.argv for run in one_sweep)  # the order moves, no command
    assert [c[0] for c in covered[:20]] == ["HalfCheetah"] * 20
    assert [c[0] for c in covered[40:52]] == ["HalfCheetah"] * 12
    for script in (ppo_continuous, eppo_continuous):
        args = script.Args()
        assert (args.steps_per_task, args.num_tasks, args.eval_frequency, args.eval_episodes, args.friction_mode) == (
            500_000, 0, 20_000, 10, "floor")
    assert len(eppo_continuous.nonstationary_envs.task_schedule("Ant-v5", "slippery", "increasing")) == 15


def test_the_launcher_pins_the_commit_the_readme_names_and_routes_its_modes_to_the_studys_folders(tmp_path):
    """The pin is the README's; --collect copies a run of SLIPPERY_INCREASING_ROOT into SLIPPERY_INCREASING_OUTPUTS
    (nothing trains); a bad mode is one usage line and exit 2."""
    pin = launch_text().split("export PAPER_LENGTH_PIN=", 1)[1].split()[0]
    with open(os.path.join(STUDY, "README.md")) as f:
        assert f"pinned commit, `{pin[:7]}`" in f.read()
    run = tmp_path / "root" / "runs" / "slippery" / "Ant" / "increasing" / "PPO" / "seed1"
    write_run(str(run), env_id="Ant-v5", experiment="slippery", strategy="increasing")
    environment = {**os.environ, "SLIPPERY_INCREASING_ROOT": str(tmp_path / "root"),
                   "SLIPPERY_INCREASING_OUTPUTS": str(tmp_path / "outputs")}
    done = subprocess.run(["bash", os.path.join(STUDY, "launch.sh"), "--collect"], env=environment, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    copied = tmp_path / "outputs" / "slippery" / "Ant" / "increasing" / "PPO" / "seed1"
    assert sorted(os.listdir(copied)) == ["config.json", "evaluations.csv", "plasticity.csv", "summary.json"]
    assert json.load(open(copied / "config.json")) == json.load(open(run / "config.json"))
    done = subprocess.run(["bash", os.path.join(STUDY, "launch.sh"), "--bogus"], env=environment, capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stderr.startswith("usage: ") and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["paralysis/Ant/back-one"], "argument setting: 'paralysis/Ant/back-one' is not one of this study's settings; "
                                 "choose one of slippery/HalfCheetah/increasing, slippery/Ant/increasing"),
    (["slippery/Ant/increasing", "--seeds", "5-1"], "argument --seeds: seed range '5-1' is empty (end < start)"),
])
def test_bad_input_is_one_line_naming_the_argument_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        analyze.main(argv)
    assert stopped.value.code == 2 and capsys.readouterr().err.splitlines()[-1].endswith(message)


def test_no_finished_run_is_one_line_and_exit_2(tmp_path, capsys):
    write_run(str(tmp_path / "slippery" / "Ant" / "increasing" / "PPO" / "seed1"), env_id="Ant-v5",
              experiment="slippery",
              strategy="increasing", finished=False)
    assert analyze.main(["slippery/Ant/increasing", "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: no finished runs of slippery/Ant/increasing under {tmp_path}\n"
