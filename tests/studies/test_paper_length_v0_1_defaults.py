"""The study "the paper's length: PPO against EPPO_ind at v0.1's defaults",
studies/2026-11-26_paper_length_v0.1_defaults/: analyze.py's tables, final_episodes.py, anchor.py, resume_store.py and
launch.sh on synthetic run directories with known answers; and compare.py of its rerun at v0.2's defaults,
studies/2026-11-27_paper_length_v0.2_defaults/, with both studies' committed tables held to their README's commands."""

import importlib.util
import json
import os
import shutil

import numpy as np
import pytest
from scipy import stats

from fake_algorithm import write_launched_run, write_run
from tiny_run import REPO_ROOT, run_script, run_until_checkpoint_then_stop

spec = importlib.util.spec_from_file_location(
    "paper_length_analyze", os.path.join(REPO_ROOT, "studies", "2026-11-26_paper_length_v0.1_defaults", "analyze.py"))
analyze = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analyze)
spec = importlib.util.spec_from_file_location(
    "paper_length_final_episodes",
    os.path.join(REPO_ROOT, "studies", "2026-11-26_paper_length_v0.1_defaults", "final_episodes.py"))
final_episodes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(final_episodes)
spec = importlib.util.spec_from_file_location(
    "paper_length_anchor", os.path.join(REPO_ROOT, "studies", "2026-11-26_paper_length_v0.1_defaults", "anchor.py"))
anchor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(anchor)
spec = importlib.util.spec_from_file_location(
    "paper_length_resume_store",
    os.path.join(REPO_ROOT, "studies", "2026-11-26_paper_length_v0.1_defaults", "resume_store.py"))
resume_store = importlib.util.module_from_spec(spec)
spec.loader.exec_module(resume_store)


def write_setting(root, finished=True, num_tasks=3, levels=(("PPO", 100, 100), ("EPPO_ind", 100, 1000))):
    """Each (method, first, later) of ``levels`` returns first + seed in task 0 and later + seed after it, 990 at
    step 0 (standing still). By default PPO returns 100 + seed throughout and EPPO_ind 1,000 + seed after task 0, so
    it leads only after the first change and is above 990 from task 1 on.
    Plasticity, the same at every step: effective rank 10 + seed (PPO) and 10 + 2 seed (EPPO_ind), stable rank 5 for
    both, the critic's dormant percentage 2 seed (PPO) and seed (EPPO_ind), the actor's 0."""
    setting_dir = root / "paralysis" / "Ant" / "back-one"
    for seed in (1, 2, 3):
        for method, first, later in levels:
            write_run(str(setting_dir / method / f"seed{seed}"), method=method, env_id="Ant-v5", seed=seed,
                      steps_per_task=100, num_tasks=num_tasks, eval_frequency=50, finished=finished,
                      returns=lambda step, task, first=first, later=later, seed=seed: 990.0 if step == 0 else
                      (first + seed if task == 0 else later + seed),
                      plasticity=lambda step, network, seed=seed, factor=1 + (method == "EPPO_ind"):
                      (10.0 + factor * seed, 5.0, 2.0 * seed / factor if network == "critic" else 0.0))
    return setting_dir


def test_tables_of_a_complete_setting(tmp_path, capsys):
    setting_dir = write_setting(tmp_path)
    assert analyze.main([str(setting_dir), "--plot", str(tmp_path / "curves.png")]) == 0
    assert (tmp_path / "curves.png").stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "cut at step 300 of 300 per seed (every run complete)" in out
    # AULC over steps 0, 50, 100 (task 0), 150, 200 (task 1), 250, 300 (task 2): PPO seed 1 = (990 + 6 * 101) / 7
    # beside the paper's mean ± se and the Welch test of "same level": our 3 seeds are 1,780 below 2,009 ± 312 (15
    # seeds), far beyond both standard errors (p < 0.0005)
    assert "| PPO | 3 | 229 ± 0 | 229 [228, 230] | 1.000 (n 3) | 2,009 ± 312 | 0.000 | 1: 228, 2: 229, 3: 230 |" in out
    # EPPO_ind seed 1: (990 + 2 * 101 + 4 * 1001) / 7 = 742
    assert ("| EPPO_ind | 3 | 743 ± 0 | 743 [742, 744] | 0.000 (n 3) | 2,724 ± 174 | 0.000 | 1: 742, 2: 743, 3: 744 |"
            in out)
    # Final Return: the returns at the 3 task ends, beside the paper's
    assert "| EPPO_ind | 3 | 702 ± 1 | 702 [701, 703] | 0.000 (n 3) | 2,977 ± 169 | 0.000 |" in out
    # per task: task 0 equal (AULC (990 + 2 * 102) / 3 = 398, p 1.000; at its end 100 + seed = 102 ± 1), tasks 1
    # and 2 EPPO_ind ahead on every seed; the paralysed joints' torque scale 1, 0.75, 0.5 (paper, Appendix B)
    assert "| 0 | 1 | 398 ± 0 | 398 ± 0 | 1.000 (n 3) | 102 ± 1 | 102 ± 1 | 1.000 (n 3) |" in out
    assert "| 1 | 0.75 | 102 ± 1 | 1,002 ± 1 | 0.000 (n 3) | 102 ± 1 | 1,002 ± 1 | 0.000 (n 3) |" in out
    assert "| 2 | 0.5 |" in out
    # plasticity at every task end, both networks
    assert "| 300 | critic | 12.0 ± 0.6 | 14.0 ± 1.2 | 5.0 ± 0.0 | 5.0 ± 0.0 | 4.0 ± 1.2 | 2.0 ± 0.6 |" in out
    # the paper's statistic: the average over the task ends; EPPO_ind's rank - PPO's = seed = 1, 2, 3 and PPO's dormant
    # percentage - EPPO_ind's = seed: paired t = 2 / (1 / sqrt(3)) = 3.464 with 2 degrees of freedom, one-sided
    # p = 0.037 (scipy.stats.t.sf(2 * 3 ** 0.5, 2) = 0.0370); equal stable ranks: p = 1
    assert "| critic | effective_rank | 12.0 ± 0.6 | 14.0 ± 1.2 | 0.037 (n 3) |" in out
    assert "| critic | stable_rank | 5.0 ± 0.0 | 5.0 ± 0.0 | 1.000 (n 3) |" in out
    assert "| critic | dormant_percent | 4.0 ± 1.2 | 2.0 ± 0.6 | 0.037 (n 3) |" in out
    assert "| actor | dormant_percent | 0.0 ± 0.0 | 0.0 ± 0.0 | 1.000 (n 3) |" in out
    # standing still: EPPO_ind first above 990 at step 150, at 4 of the 6 later evaluations (150, 200, 250, 300)
    assert "| EPPO_ind | 1 | 990 | 150 | 4 of 6 (67%) |" in out and "| PPO | 1 | 990 | never | 0 of 6 (0%) |" in out

    # --seeds: only the named seeds (the finished ones while others still run), every table over them alone
    assert analyze.main([str(setting_dir), "--seeds", "1-2"]) == 0
    out = capsys.readouterr().out
    assert ("| PPO | 2 | 228 ± 0 |" in out and "1: 228, 2: 229 |" in out
            and "| 3 |" not in out.split("standing still")[1])


def test_unfinished_runs_are_cut_at_their_common_step_and_say_so(tmp_path, capsys):
    setting_dir = write_setting(tmp_path, num_tasks=3)
    # seed 2 of EPPO_ind has only reached step 150
    path = setting_dir / "EPPO_ind" / "seed2" / "evaluations.csv"
    rows = path.read_text().splitlines()
    path.write_text("\n".join(row for row in rows if row.startswith("global_step") or int(row.split(",")[0]) <= 150)
                    + "\n")
    assert analyze.main([str(setting_dir)]) == 0
    out = capsys.readouterr().out
    assert "cut at step 150 of 300 per seed (UNFINISHED: 1 of 3 tasks ended; no verdict)" in out
    per_task = out.split("Per task")[1].split("Plasticity")[0]
    assert "| 2 |" not in per_task  # tasks 0 and 1 only
    # task 1 has begun (its AULC: the evaluation at step 150) but not ended: no return at its end yet
    assert "| 1 | 0.75 | 102 ± 1 | 1,002 ± 1 | 0.000 (n 3) | | | |" in per_task


def test_final_episodes_reevaluate_each_runs_final_policy_and_check_its_last_evaluation(tmp_path, capsys):
    """A real tiny PPO run: its final policy on its last task returns exactly its last evaluation, and a HalfCheetah
    episode never ends early, so the mean episode length is --max-episode-steps (50 in the tiny flags). A run without
    its last evaluation is named as unfinished, not evaluated; a last evaluation that was not what the policy returns
    is flagged."""
    run_dir = tmp_path / "paralysis" / "HalfCheetah" / "back-one" / "PPO" / "seed1"
    result = run_script("ppo_continuous.py", run_dir)
    assert result.returncode == 0, result.stderr[-2000:]
    setting_dir = run_dir.parent.parent
    assert final_episodes.main([str(setting_dir)]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| PPO | 1 |")]
    assert len(row) == 1 and row[0].split(" | ")[3] == "50" and "(equal)" in row[0]

    # a copy whose last evaluation is missing is an unfinished run: named, not evaluated
    unfinished = setting_dir / "PPO" / "seed2"
    shutil.copytree(run_dir, unfinished)
    config = json.loads((unfinished / "config.json").read_text())
    config["args"]["seed"] = 2
    (unfinished / "config.json").write_text(json.dumps(config))
    lines = (unfinished / "evaluations.csv").read_text().splitlines()
    (unfinished / "evaluations.csv").write_text("\n".join(lines[:-1]) + "\n")
    assert final_episodes.main([str(setting_dir)]) == 0
    out = capsys.readouterr().out
    assert "| PPO | 2 |" not in out and "Unfinished, not evaluated: PPO seed 2 (last evaluation at step 384)" in out

    evaluations = run_dir / "evaluations.csv"
    lines = evaluations.read_text().splitlines()
    fields = lines[-1].split(",")
    fields[3] = str(float(fields[3]) + 1.0)  # return_mean of the last evaluation
    evaluations.write_text("\n".join(lines[:-1] + [",".join(fields)]) + "\n")
    assert final_episodes.main([str(setting_dir)]) == 0
    assert "(DIFFERS)" in capsys.readouterr().out


def test_welch_test_against_the_papers_mean_and_standard_error():
    """against_paper against the Welch test written out: t = (m - M) / sqrt(se^2 + SE^2) with the Welch-Satterthwaite
    degrees of freedom, two-sided; and p = 1 when our mean is the paper's."""
    values, paper_mean, paper_se = [3000.0, 4000.0, 5000.0, 6000.0], 3500.0, 150.0
    se = np.std(values, ddof=1) / np.sqrt(len(values))  # 645.5
    t = (np.mean(values) - paper_mean) / np.sqrt(se ** 2 + paper_se ** 2)  # 1.51
    df = (se ** 2 + paper_se ** 2) ** 2 / (se ** 4 / (len(values) - 1) + paper_se ** 4 / (15 - 1))  # 3.3
    assert analyze.against_paper(values, paper_mean, paper_se) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-12)
    assert analyze.against_paper(values, 4500.0, paper_se) == pytest.approx(1.0)


def test_anchor_table_and_its_check_against_the_paralysis_runs_task_0(tmp_path, capsys):
    """Stationary runs of 1,000 steps returning 990 at step 0 (standing still) and step * seed / 2 after it, against
    paralysis runs whose task 0 (500 steps) returns the same, except seed 3 from step 300 on."""
    outputs = tmp_path / "outputs"
    anchor_dir, paralysis_dir = outputs / "none" / "Ant" / "PPO", outputs / "paralysis" / "Ant" / "back-one" / "PPO"
    for seed in (1, 2, 3):
        def returns(step, task, seed=seed):
            return 990.0 if step == 0 else step * seed / 2
        write_run(str(anchor_dir / f"seed{seed}"), env_id="Ant-v5", experiment="none", seed=seed, steps_per_task=1000,
                  num_tasks=1, eval_frequency=100, returns=returns)
        write_run(str(paralysis_dir / f"seed{seed}"), env_id="Ant-v5", seed=seed, steps_per_task=500, num_tasks=2,
                  eval_frequency=100, returns=lambda step, task, seed=seed, same=returns:
                  same(step, task) + (1.0 if seed == 3 and step >= 300 else 0.0))
    assert anchor.main([str(anchor_dir), "--paralysis", str(paralysis_dir), "--milestone", "500",
                        "--beside", str(paralysis_dir), "--plot", str(tmp_path / "anchor.png")]) == 0
    assert (tmp_path / "anchor.png").stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "cut at step 1,000 of 1,000 per seed (every run complete)" in out
    # seed 1: 250 at step 500, 500 at 1,000; mean over the 11 evaluations (990 + 50 * (1 + ... + 10)) / 11 = 340;
    # never above 990
    assert "| 1 | 990 | 250 | 500 | 340 | 500 (1,000) | never | 0 of 10 |" in out
    # seed 3: 1.5 * step > 990 from step 700 on: steps 700, 800, 900, 1,000; mean (990 + 150 * 55) / 11 = 840
    assert "| 3 | 990 | 750 | 1,500 | 840 | 1,500 (1,000) | 700 | 4 of 10 |" in out
    # over seeds (250, 500, 750) * k: standard error 250 k / sqrt(3); seed 2 is above 990 only at step 1,000
    assert "| mean ± se (3 seeds) | 990 ± 0 | 500 ± 144 | 1,000 ± 289 | 590 ± 144 | 1,000 ± 289 | | 5 of 30 |" in out
    assert "| 1 | identical (6 evaluations) |" in out and "| 3 | differs from step 300 |" in out
    # beside it, the paralysis runs over the same seeds and steps: seed 3's 8 evaluations from step 300 on are 1
    # higher: at step 500 (250, 500, 751), se 144.6; means over the evaluations (340, 590, 840 + 8 / 11), se 144.6
    assert "| the anchor (none/Ant/PPO) | 500 ± 144 | 1,000 ± 289 | 590 ± 144 |" in out
    assert "| paralysis/Ant/back-one/PPO | 500 ± 145 | 1,000 ± 289 | 590 ± 145 |" in out
    # a --beside directory without one of the anchor's seeds is refused: no mean over other seeds
    shutil.rmtree(paralysis_dir / "seed3")
    assert anchor.main([str(anchor_dir), "--beside", str(paralysis_dir)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"error: --beside {paralysis_dir}: seeds [3] missing or not at step 1,000" in err

    # an unfinished seed cuts every run at its last evaluation: no column at 1,000; seed 1's mean over its 7
    # evaluations up to step 600 is (990 + 50 * (1 + ... + 6)) / 7 = 291
    path = anchor_dir / "seed2" / "evaluations.csv"
    path.write_text("\n".join(path.read_text().splitlines()[:8]) + "\n")  # steps 0-600
    assert anchor.main([str(anchor_dir), "--milestone", "500"]) == 0
    out = capsys.readouterr().out
    assert "cut at step 600 of 1,000 per seed (UNFINISHED)" in out and "| 1 | 990 | 250 | 291 | 300 (600) |" in out
    # seed 2 stopped at step 400, before the first milestone: no empty column; seed 2 is checked against task 0 as far
    # as it has got (5 evaluations, steps 0-400), seed 1 over all 6 up to step 500; seed 3 has no paralysis run any
    # more. Seed 1 up to step 400: (990 + 50 * (1 + ... + 4)) / 5 = 298
    path.write_text("\n".join(path.read_text().splitlines()[:6]) + "\n")  # steps 0-400
    assert anchor.main([str(anchor_dir), "--paralysis", str(paralysis_dir), "--milestone", "500"]) == 0
    out = capsys.readouterr().out
    assert "| seed | step 0 (standing still) | mean over all evaluations | best evaluation" in out
    assert "| 1 | 990 | 298 | 200 (400) | never | 0 of 4 |" in out
    assert "| 1 | identical (6 evaluations) |" in out and "| 3 | no paralysis run |" in out
    assert "| 2 | identical so far (5 evaluations, up to step 400) |" in out


spec = importlib.util.spec_from_file_location(
    "paper_length_compare", os.path.join(REPO_ROOT, "studies", "2026-11-27_paper_length_v0.2_defaults", "compare.py"))
compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare)


def test_the_new_default_beside_the_old(tmp_path, capsys):
    """Old default: write_setting's runs. New default: PPO at 1,000 + seed after step 0 (above standing still from
    the first evaluation on), EPPO_ind at 100 + seed throughout. So the new PPO is above the old by a constant
    771.4 per seed (p 0.000), the new EPPO_ind below both, and the new default reverses EPPO_ind > PPO."""
    write_setting(tmp_path / "old")
    write_setting(tmp_path / "new", levels=(("PPO", 1000, 1000), ("EPPO_ind", 100, 100)))
    assert compare.main(["paralysis/Ant/back-one", "--new", str(tmp_path / "new"), "--old", str(tmp_path / "old"),
                         "--plot", str(tmp_path / "both.png")]) == 0
    assert (tmp_path / "both.png").stat().st_size > 10_000
    out = capsys.readouterr().out
    assert "cut at step 300 of 300 per seed (every run complete)" in out
    # new PPO seed 1: AULC (990 + 6 * 1,001) / 7 = 999.4; old PPO seed 1: (990 + 6 * 101) / 7 = 228.0. Welch against
    # the paper's 2,009 ± 312 (sd 312 sqrt(15) over 15 seeds): t = -1,009 / 312 = -3.2 with ≈ 14 degrees of freedom
    assert ("| PPO | new | 3 | 1,000 ± 0 | 1,000 [999, 1,001] |  | 0.000 (n 3) | 2,009 ± 312 | 0.006 "
            "| 1: 999, 2: 1,000, 3: 1,001 |") in out
    assert "| PPO | old | 3 | 229 ± 0 | 229 [228, 230] |  |  | 2,009 ± 312 | 0.000 | 1: 228, 2: 229, 3: 230 |" in out
    # new EPPO_ind seed 1: (990 + 6 * 101) / 7 = 228.0, below the new PPO (p 1.000) and below its old 742 (p 1.000)
    assert "| EPPO_ind | new | 3 | 229 ± 0 | 229 [228, 230] | 1.000 (n 3) | 1.000 (n 3) |" in out
    assert "| EPPO_ind | old | 3 | 743 ± 0 | 743 [742, 744] | 0.000 (n 3) |  |" in out
    # standing still (990): the new PPO is above from step 50 on, every later evaluation; the old EPPO_ind from task 1
    assert "| PPO | new | 1: 50, 2: 50, 3: 50 | 18 of 18 (100%) |" in out
    assert "| EPPO_ind | old | 1: 150, 2: 150, 3: 150 | 12 of 18 (67%) |" in out
    assert "### The new default alone (studies/2026-11-26_paper_length_v0.1_defaults/analyze.py)" in out
    # seed 3 not yet collected at the new default: its runs are complete, but 2 of 3 seeds are no verdict
    for method in ("PPO", "EPPO_ind"):
        shutil.rmtree(tmp_path / "new" / "paralysis" / "Ant" / "back-one" / method / "seed3")
    argv = ["paralysis/Ant/back-one", "--new", str(tmp_path / "new"), "--old", str(tmp_path / "old")]
    assert compare.main(argv) == 0
    two_seeds = capsys.readouterr().out
    assert "cut at step 300 of 300 per seed (every collected run complete, but only 2 of the 3 seeds; no verdict)" \
        in two_seeds
    # seed 3 launched again, at step 100: every run is cut there, unless --seeds reads the two finished ones alone
    for method in ("PPO", "EPPO_ind"):
        write_run(str(tmp_path / "new" / "paralysis" / "Ant" / "back-one" / method / "seed3"), method=method,
                  env_id="Ant-v5", seed=3, steps_per_task=100, num_tasks=3, eval_frequency=50, finished=False,
                  drop_steps=range(150, 301, 50), returns=lambda step, task: 990.0)
    assert compare.main(argv) == 0
    assert "cut at step 100 of 300 per seed (UNFINISHED: 1 of 3 tasks ended; no verdict)" in capsys.readouterr().out
    assert compare.main(argv + ["--seeds", "1-2"]) == 0
    assert capsys.readouterr().out == two_seeds
    with pytest.raises(SystemExit) as bad:
        compare.main(argv + ["--seeds", "2-1"])
    assert bad.value.code == 2 and "argument --seeds: seed range '2-1' is empty" in capsys.readouterr().err


@pytest.mark.parametrize("setting, tables", [("paralysis/Ant/back-one", "ant_tables.md"),
                                             ("paralysis/HalfCheetah/back-one", "halfcheetah_tables.md")])
def test_the_committed_new_default_tables_are_what_compare_prints_from_the_committed_outputs(setting, tables, capsys):
    """studies/2026-11-27_paper_length_v0.2_defaults's tables are recomputable: compare.py on the committed
    outputs of both defaults prints them exactly."""
    assert compare.main([setting]) == 0
    with open(os.path.join(REPO_ROOT, "studies", "2026-11-27_paper_length_v0.2_defaults", tables)) as f:
        assert capsys.readouterr().out == f.read()


@pytest.mark.parametrize("study", ["2026-11-26_paper_length_v0.1_defaults", "2026-11-27_paper_length_v0.2_defaults"])
def test_the_committed_anchor_tables_are_what_anchor_prints_from_the_committed_outputs(study, tmp_path, capsys):
    """The stationary Ant anchor's table is recomputable with the documented command: anchor.py on the committed
    outputs prints it exactly (the figure's path goes to stderr, not into the table)."""
    outputs = os.path.join(REPO_ROOT, "studies", study, "outputs")
    paralysis = os.path.join(outputs, "paralysis", "Ant", "back-one")
    assert anchor.main([os.path.join(outputs, "none", "Ant", "PPO"), "--paralysis", os.path.join(paralysis, "PPO"),
                        "--beside", os.path.join(paralysis, "PPO"), os.path.join(paralysis, "EPPO_ind"),
                        "--plot", str(tmp_path / "anchor.png")]) == 0
    with open(os.path.join(REPO_ROOT, "studies", study, "ant_anchor_tables.md")) as f:
        assert capsys.readouterr().out == f.read()


def test_the_new_default_beside_the_old_refuses_an_empty_cut(tmp_path, capsys):
    """A new-default run with only its step-0 evaluation (launched, not yet evaluated again) leaves nothing to
    compare: exit 2 with a message, not a division by zero; --up-to beyond the common step is refused the same way."""
    write_setting(tmp_path / "old")
    setting_dir = write_setting(tmp_path / "new")
    write_run(str(setting_dir / "EPPO_ind" / "seed2"), method="EPPO_ind", env_id="Ant-v5", seed=2, steps_per_task=100,
              num_tasks=3, eval_frequency=50, finished=False, drop_steps=range(50, 301, 50),
              returns=lambda step, task: 990.0)
    argv = ["paralysis/Ant/back-one", "--new", str(tmp_path / "new"), "--old", str(tmp_path / "old")]
    assert compare.main(argv) == 2
    assert "error: nothing to compare at step 0" in capsys.readouterr().err
    write_setting(tmp_path / "new")  # every run complete again (300 steps)
    assert compare.main(argv + ["--up-to", "350"]) == 2
    assert "error: --up-to 350 is beyond the step every run has reached (300)" in capsys.readouterr().err


def test_a_stashed_run_resumes_bit_for_bit_on_a_fresh_machine(tmp_path, capsys):
    """The study's runs across machines (studies/2026-11-26_paper_length_v0.1_defaults/resume_store.py): a two-seed
    tiny PPO run stopped by SIGTERM, its resume points stashed into a store, restored into the empty run root of a
    "fresh machine" and resumed there, logs exactly the evaluations and plasticity of the same run left uninterrupted.
    Restore never moves a run back; once the run has finished, stash drops its resume points and restore brings back
    its collected outputs (summary.json included), so the sweep would skip it."""
    flags = ("--num-seeds", "2", "--checkpoint-frequency", "128")
    setting = os.path.join("paralysis", "HalfCheetah", "back-one", "PPO")
    reference = tmp_path / "reference"
    result = run_script("ppo_continuous.py", reference / "seed{seed}", *flags)
    assert result.returncode == 0, result.stderr[-2000:]

    first_runs, store = tmp_path / "machine1" / "runs", tmp_path / "repository" / "resume"
    stopped = run_until_checkpoint_then_stop("ppo_continuous.py", first_runs / setting / "seed{seed}",
                                             first_runs / setting / "seed2" / "checkpoint.pt", *flags)
    assert stopped.returncode == 75, stopped.stderr[-2000:]
    # as if the process had been killed between its seeds' checkpoints: seed 2's newest is a step behind seed 1's,
    # so both are stashed at the step they share (seed 1's checkpoint.prev.pt)
    seed2 = first_runs / setting / "seed2"
    behind = resume_store.checkpoint_step_of_file(str(seed2 / "checkpoint.prev.pt"))
    os.replace(seed2 / "checkpoint.prev.pt", seed2 / "checkpoint.pt")
    assert resume_store.main(["stash", str(first_runs), str(store)]) == 0
    stashed = capsys.readouterr().out
    step = resume_store.newest_step(str(store / setting / "seed1"))
    assert step == behind and 0 < step < resume_store.newest_step(str(first_runs / setting / "seed1"))
    assert f"{setting}/seed1: checkpoint at {step:,} stashed" in stashed
    assert sorted(os.listdir(store / setting / "seed1")) == sorted(resume_store.RESUME_FILES)
    # a run root that holds the same or a later checkpoint is not touched
    assert resume_store.restore(str(first_runs), str(store), str(tmp_path / "no-outputs")) == []

    second_runs = tmp_path / "machine2" / "runs"
    assert resume_store.main(["restore", str(second_runs), str(store), str(tmp_path / "no-outputs")]) == 0
    assert f"{setting}/seed1: resumes from the stored checkpoint at {step:,}" in capsys.readouterr().out
    result = run_script("ppo_continuous.py", second_runs / setting / "seed{seed}", *flags)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resuming {second_runs / setting / 'seed2'} from global_step {step} " in result.stdout  # not a fresh start
    for seed in (1, 2):
        for name in ("evaluations.csv", "plasticity.csv"):
            assert (second_runs / setting / f"seed{seed}" / name).read_bytes() == \
                (reference / f"seed{seed}" / name).read_bytes(), (seed, name)

    # finished: stash drops the resume points; a third machine gets the collected outputs, summary.json included
    assert resume_store.stash(str(second_runs), str(store)) == [
        f"{setting}/seed{seed}: finished, its resume point dropped from the store" for seed in (1, 2)]
    assert not (store / setting).exists() or resume_store.run_directories(str(store)) == []
    third_runs = tmp_path / "machine3" / "runs"
    assert len(resume_store.restore(str(third_runs), str(store), str(second_runs))) == 2
    assert (third_runs / setting / "seed2" / "summary.json").read_bytes() == \
        (second_runs / setting / "seed2" / "summary.json").read_bytes()


def test_the_launcher_reports_collects_and_stashes_a_study_root(tmp_path):
    """studies/2026-11-26_paper_length_v0.1_defaults/launch.sh's modes on a hand-made root (nothing trains): --status
    prints each run's steps, --collect copies the small outputs, --stash the unfinished run's resume point (a finished
    run's is dropped); a bad flag and a pin that is not a commit exit with an error, starting nothing."""
    import subprocess

    root, outputs, store = tmp_path / "root", tmp_path / "outputs", tmp_path / "store"
    setting = root / "runs" / "paralysis" / "Ant" / "back-one"
    for method, finished in (("PPO", True), ("EPPO_ind", False)):
        write_launched_run(str(setting / method / "seed1"), method=method, finished=finished,
                           drop_steps=() if finished else (150, 200))
    (store / "paralysis" / "Ant" / "back-one" / "PPO" / "seed1").mkdir(parents=True)  # from before it finished
    (store / "paralysis" / "Ant" / "back-one" / "PPO" / "seed1" / "config.json").write_text("{}")
    env = {**os.environ, "PAPER_LENGTH_ROOT": str(root), "PAPER_LENGTH_OUTPUTS": str(outputs),
           "PAPER_LENGTH_STORE": str(store)}

    def launch(*flags, **extra):
        return subprocess.run(["bash", os.path.join(REPO_ROOT, "studies", "2026-11-26_paper_length_v0.1_defaults",
                                                    "launch.sh"), *flags],
                              env={**env, **extra}, capture_output=True, text=True, timeout=120)

    status = launch("--status")
    assert status.returncode == 0, status.stderr
    assert [line.split() for line in status.stdout.splitlines()[1:]] == [
        ["paralysis/Ant/back-one/EPPO_ind/seed1", "100", "200", "unfinished"],
        ["paralysis/Ant/back-one/PPO/seed1", "200", "200", "finished"]]
    assert launch("--collect").returncode == 0
    for method, names in (("PPO", ["config.json", "evaluations.csv", "plasticity.csv", "summary.json"]),
                          ("EPPO_ind", ["config.json", "evaluations.csv", "plasticity.csv"])):
        collected = outputs / "paralysis" / "Ant" / "back-one" / method / "seed1"
        assert sorted(os.listdir(collected)) == names
        assert (collected / "evaluations.csv").read_bytes() == \
            (setting / method / "seed1" / "evaluations.csv").read_bytes()
    stash = launch("--stash")
    assert stash.returncode == 0, stash.stderr
    assert "EPPO_ind/seed1: checkpoint at 100 stashed" in stash.stdout
    assert "PPO/seed1: finished, its resume point dropped from the store" in stash.stdout
    assert resume_store.run_directories(str(store)) == ["paralysis/Ant/back-one/EPPO_ind/seed1"]
    bad = launch("--satus")
    assert bad.returncode == 2 and "usage:" in bad.stderr
    pin = launch(PAPER_LENGTH_PIN="0" * 40)
    assert pin.returncode == 1 and "could not clone" in pin.stderr and not (root / "launch.log").exists()
