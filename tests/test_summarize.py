"""scripts/summarize.py on synthetic run directories with hand-computed metrics and statistics."""

import csv
import io
import math
import os

import numpy as np
import pytest

from scripts import runlist, summarize
from tests.fake_algorithm import write_run

HC_BACK_ONE = runlist.Setting("paralysis", "HalfCheetah", "back-one")
HC_FRONT_ONE = runlist.Setting("paralysis", "HalfCheetah", "front-one")


def run_path(root, setting, method, seed):
    return runlist.run_dir(str(root), setting, method, seed)


def write_constant(root, setting, method, seed, value, **kwargs):
    """A finished run whose every evaluation returns `value` (AULC = Final Return = value)."""
    write_run(run_path(root, setting, method, seed), method=method, env_id=runlist.ENV_IDS[setting.env],
              experiment=setting.experiment, strategy=setting.strategy, seed=seed,
              returns=lambda step, task: value, **kwargs)  # fmt: skip


def test_expected_evaluations_follow_the_contract():
    # steps_per_task=100, 2 tasks, eval every 30: 0, 30, 60, 90, 100 (end of task 0), 120, ..., 200 (end of task 1)
    assert summarize.expected_evaluations(100, 2, 30) == [
        (0, 0), (30, 0), (60, 0), (90, 0), (100, 0), (120, 1), (150, 1), (180, 1), (200, 1)
    ]  # fmt: skip


def test_expected_evaluations_match_ppo_continuous():
    import ppo_continuous

    for steps_per_task, num_tasks, eval_frequency in ((500000, 9, 20000), (256, 2, 128), (100, 3, 30), (1000, 2, 3000)):
        steps = ppo_continuous.evaluation_steps(steps_per_task, num_tasks, eval_frequency)
        assert summarize.expected_evaluations(steps_per_task, num_tasks, eval_frequency) == [
            (step, ppo_continuous.evaluated_task(step, steps_per_task)) for step in steps
        ]


def test_aulc_and_final_return_of_one_run(tmp_path):
    # rows at steps 0, 50, 100, 150, 200 with returns 1..5 (step / 50 + 1)
    directory = run_path(tmp_path, HC_BACK_ONE, "PPO", 1)
    write_run(directory, steps_per_task=100, num_tasks=2, eval_frequency=50, returns=lambda step, task: step / 50 + 1)
    run = summarize.load_run(directory)
    assert run.complete, run.problems
    assert (run.setting, run.method, run.seed) == (HC_BACK_ONE, "PPO", 1)
    assert run.aulc == pytest.approx((1 + 2 + 3 + 4 + 5) / 5)  # every evaluation point, step 0 included
    assert run.final_return == pytest.approx((3 + 5) / 2)  # steps 100 (task 0) and 200 (task 1)


def test_incomplete_runs_are_reported_not_averaged(tmp_path):
    for seed in (1, 2):
        write_constant(tmp_path, HC_BACK_ONE, "PPO", seed, 100.0 * seed)
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 3, 999.0, finished=False)  # no summary.json
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 4, 999.0, drop_steps=(200,))  # end of task 1 missing
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 5, 999.0, drop_steps=(50,))  # an intermediate row missing
    os.makedirs(run_path(tmp_path, HC_BACK_ONE, "PPO", 6))  # crashed at once: only the sweep's log
    open(os.path.join(run_path(tmp_path, HC_BACK_ONE, "PPO", 6), "stdout.log"), "w").close()

    tables, left_out = summarize.build_tables(summarize.load_runs(str(tmp_path)))
    problems = {os.path.basename(r.run_dir): "; ".join(r.problems) for r in left_out}
    assert set(problems) == {"seed3", "seed4", "seed5", "seed6"}
    assert "no summary.json" in problems["seed3"]
    assert "missing (steps 200)" in problems["seed4"]
    assert "missing (steps 50)" in problems["seed5"]
    assert "no evaluations.csv" in problems["seed6"]
    aulc_row, final_row = [r for r in tables[0].rows if r.labels[2] == "back-one"]
    assert aulc_row.cells[0].mean == pytest.approx(150.0) and final_row.cells[0].mean == pytest.approx(150.0)  # seeds 1, 2
    text = summarize.render_markdown(tables, left_out, 2)
    assert "## Incomplete or excluded runs" in text
    assert run_path(tmp_path, HC_BACK_ONE, "PPO", 4) in text


def student_t3_sf(t):
    """P(T > t) for Student's t with 3 degrees of freedom, closed form:
    F(t) = 1/2 + (1/pi) * (x / (1 + x^2) + arctan(x)), x = t / sqrt(3)."""
    x = t / math.sqrt(3)
    return 0.5 - (x / (1 + x * x) + math.atan(x)) / math.pi


def test_cell_statistics_and_significance(tmp_path):
    # AULC per seed (constant returns). Best = A (mean 13).
    values = {"EPPO_ind": [10, 12, 14, 16], "PPO": [9, 11, 12, 15], "PFO": [11, 10, 15, 14]}
    for method, per_seed in values.items():
        for seed, value in reversed(list(enumerate(per_seed, start=1))):  # file order must not matter: pairs by seed
            write_constant(tmp_path, HC_BACK_ONE, method, seed, float(value))
    groups, left_out = summarize.group_runs(summarize.load_runs(str(tmp_path)))
    assert not left_out
    summary = summarize.summarize_metric(groups, "aulc", "paralysis", None)
    cells = {m: summary.cells[(HC_BACK_ONE, m)] for m in values}

    # mean and standard error: EPPO_ind sample variance = (9 + 1 + 1 + 9) / 3 -> se = sqrt(20/3) / 2
    assert cells["EPPO_ind"].mean == pytest.approx(13.0)
    assert cells["EPPO_ind"].se == pytest.approx(math.sqrt(20 / 3) / 2)
    assert cells["EPPO_ind"].best and not cells["EPPO_ind"].not_worse

    # PPO: mean 11.75, se 2.5 / 2; differences 1, 1, 2, 1 -> mean 1.25, sd 0.5, t = 1.25 / (0.5 / 2) = 5, p = P(T_3 > 5) ~ 0.0077 < 0.05
    assert cells["PPO"].p_value == pytest.approx(student_t3_sf(5.0), rel=1e-9)
    assert cells["PPO"].p_value < 0.05 and not cells["PPO"].not_worse
    # PFO: differences -1, 2, -1, 2 -> mean 0.5, sd sqrt(3), t = 0.5 / (sqrt(3) / 2), p ~ 0.30 >= 0.05: underlined
    assert cells["PFO"].p_value == pytest.approx(student_t3_sf(1 / math.sqrt(3)), rel=1e-9)
    assert cells["PFO"].not_worse

    table = summarize.rows_table([summary], "paralysis")
    text = summarize.render_markdown([table], [], 2)
    row = next(line for line in text.splitlines() if "back-one" in line)
    assert "| 11.75 ± 1.25 | <u>12.50 ± 1.19</u> | **13.00 ± 1.29** |" in row  # columns PPO, PFO, EPPO_ind
    latex = summarize.render_latex([table], [], 2)
    assert "$\\bf 13.00\\sd{\\pm 1.29}$" in latex and "$\\underline{12.50\\sd{\\pm 1.19}}$" in latex


def test_paired_test_uses_common_seeds_and_degenerate_cases():
    p, pairs = summarize.paired_pvalue({1: 5.0, 2: 6.0, 3: 9.0}, {2: 5.0, 3: 7.0, 4: 0.0})
    assert pairs == 2  # seeds 2 and 3: differences 1 and 2 -> t = 1.5 / (sqrt(0.5) / sqrt(2)) = 3, df = 1
    assert p == pytest.approx(0.5 - math.atan(3.0) / math.pi)  # Student t with 1 dof is Cauchy
    assert math.isnan(summarize.paired_pvalue({1: 1.0}, {1: 0.0})[0])  # one pair: no test
    assert summarize.paired_pvalue({1: 1.0, 2: 2.0}, {1: 1.0, 2: 2.0})[0] == 1.0  # identical: not worse
    assert summarize.paired_pvalue({1: 2.0, 2: 3.0}, {1: 1.0, 2: 2.0})[0] == 0.0  # always exactly 1 better


def test_rankings_with_ties_and_average_rows(tmp_path):
    # back-one: A=3, B=2, C=1 -> ranks 1, 2, 3; front-one: A=1, B=C=2 -> ranks 3, 1.5, 1.5
    means = {HC_BACK_ONE: {"PPO": 3.0, "PFO": 2.0, "CB": 1.0}, HC_FRONT_ONE: {"PPO": 1.0, "PFO": 2.0, "CB": 2.0}}
    for setting, row in means.items():
        for method, value in row.items():
            for seed in (1, 2):
                write_constant(tmp_path, setting, method, seed, value + (seed - 1.5) * 0.1)
    tables, _ = summarize.build_tables(summarize.load_runs(str(tmp_path)))
    rows = {r.labels[1] or r.labels[2]: r for r in tables[0].rows[:5]}  # the AULC block
    assert tables[0].columns == ["PPO", "PFO", "CB"]
    ranking = [c.mean for c in rows["Overall Average Ranking"].cells]
    assert ranking == [2.0, 1.75, 2.25]
    assert [c.bold for c in rows["Overall Average Ranking"].cells] == [False, True, False]
    assert [c.mean for c in rows["Overall Average"].cells] == pytest.approx([2.0, 2.0, 1.5])
    assert [c.bold for c in rows["Overall Average"].cells] == [True, True, False]  # tied best: both bold


# The paper's printed average rows (eppo-paper.tex, Table 1 lines 474-605 and Table 2 lines 658-945).
PAPER_RANKINGS = {
    ("slippery", "aulc"): [5.3, 5.0, 6.5, 4.5, 3.5, 1.5, 1.8],
    ("slippery", "final_return"): [5.5, 5.3, 6.5, 4.5, 3.0, 1.5, 1.8],
    ("paralysis", "aulc"): [5.9, 5.2, 6.2, 3.8, 3.1, 2.1, 1.7],
}
PAPER_AVERAGE_SCORES = {
    ("slippery", "aulc"): [2406, 2279, 1956, 2359, 2658, 2962, 2908],
    ("paralysis", "aulc"): [2133, 2184, 2091, 2343, 2643, 2781, 2828],
    ("paralysis", "final_return"): [2310, 2376, 2248, 2547, 2881, 3039, 3074],
}


def test_average_rows_reproduce_the_paper_from_its_cell_means():
    paper = summarize.read_paper_results()
    methods = list(runlist.METHODS)
    for (experiment, metric), expected in PAPER_RANKINGS.items():
        settings = [s for s in runlist.paper_settings() if s.experiment == experiment]
        ranks = summarize.average_ranks({s: {m: paper[(metric, s, m)][0] for m in methods} for s in settings}, settings)
        assert [summarize._number(ranks[m], 1) for m in methods] == [summarize._number(v, 1) for v in expected]
    for (experiment, metric), expected in PAPER_AVERAGE_SCORES.items():
        settings = [s for s in runlist.paper_settings() if s.experiment == experiment]
        scores = summarize.average_scores({s: {m: paper[(metric, s, m)][0] for m in methods} for s in settings}, settings)
        # within 1: the paper averaged unrounded means (ours are rounded to integers, error <= 0.5) and rounded the result
        assert np.abs(np.array([scores[m] for m in methods]) - expected).max() <= 1.0
    # Table 2's Final Return ranking row (5.8, 5.3, 6.4, 3.9, 3.9, 1.9, 1.7) sums to 28.9, but the mean ranks of
    # 7 methods always sum to 1 + ... + 7 = 28: recomputed from its own cells it is 5.7, 5.3, 6.3, 4.1, 3.0, 1.9, 1.7.
    settings = [s for s in runlist.paper_settings() if s.experiment == "paralysis"]
    means = {s: {m: paper[("final_return", s, m)][0] for m in methods} for s in settings}
    recomputed = summarize.average_ranks(means, settings)
    assert sum(recomputed.values()) == pytest.approx(28.0)
    assert [summarize._number(recomputed[m], 1) for m in methods] == ["5.7", "5.3", "6.3", "4.1", "3.0", "1.9", "1.7"]


def test_slippery_layout_csv_and_paper_column(tmp_path):
    for setting in [s for s in runlist.paper_settings() if s.experiment == "slippery"]:
        for method, value in (("PPO", 2000.0), ("EPPO_cor", 3000.0)):
            for seed in (1, 2, 3):
                write_constant(tmp_path, setting, method, seed, value + seed, kappa=0.1 if method == "EPPO_cor" else None)
    runs = summarize.load_runs(str(tmp_path))
    paper = summarize.read_paper_results()
    tables, _ = summarize.build_tables(runs, paper)
    (table,) = tables
    assert table.column_groups == [("decreasing", 2), ("increasing", 2), ("Average", 2)]
    assert table.columns == ["Ant", "HalfCheetah", "Ant", "HalfCheetah", "Score", "Ranking"]
    assert [r.labels[1] for r in table.rows] == ["PPO", "EPPO_cor", "PPO", "EPPO_cor"]
    text = summarize.render_markdown(tables, [], 0)
    # EPPO_cor, decreasing/Ant: ours 3002 +- 1 (paper 2561 +- 128, Table 1)
    assert "**3002 ± 1** (paper 2561 ± 128)" in text
    assert "Seeds per cell: 3." in text

    rows = list(csv.DictReader(io.StringIO(summarize.render_csv(runs, paper))))
    cell = next(r for r in rows if r["row"] == "cell" and r["metric"] == "aulc" and r["method"] == "PPO"
                and r["env"] == "Ant" and r["strategy"] == "increasing")  # fmt: skip
    assert float(cell["mean"]) == pytest.approx(2002.0) and float(cell["se"]) == pytest.approx(np.std([1, 2, 3], ddof=1) / math.sqrt(3))
    assert (cell["paper_mean"], cell["paper_se"], cell["best"]) == ("2237.0", "254.0", "False")
    ranking = [r for r in rows if r["row"] == "average_ranking" and r["metric"] == "final_return"]
    assert {r["method"]: float(r["mean"]) for r in ranking} == {"PPO": 2.0, "EPPO_cor": 1.0}


def test_duplicate_seed_and_mixed_kappas(tmp_path):
    write_constant(tmp_path / "a", HC_BACK_ONE, "EPPO_cor", 1, 5.0, kappa=0.1)
    write_constant(tmp_path / "b", HC_BACK_ONE, "EPPO_cor", 1, 6.0, kappa=0.1)
    write_constant(tmp_path / "c", HC_BACK_ONE, "EPPO_cor", 1, 7.0, kappa=0.25)
    groups, left_out = summarize.group_runs(summarize.load_runs(str(tmp_path)))
    assert set(groups) == {(HC_BACK_ONE, "EPPO_cor (kappa=0.1)"), (HC_BACK_ONE, "EPPO_cor (kappa=0.25)")}
    assert len(left_out) == 1 and "same setting, method and seed" in left_out[0].problems[0]


def test_select_kappa_picks_best_mean_aulc(tmp_path):
    aulcs = {("EPPO_cor", 0.01): [1.0, 2.0], ("EPPO_cor", 0.1): [3.0, 3.0], ("EPPO_cor", 0.25): [2.0, 2.5],
             ("EPPO_ind", 0.01): [4.0, 4.0], ("EPPO_ind", 0.05): [5.0, 3.0], ("EPPO_ind", 0.1): [0.0, 1.0]}  # fmt: skip
    for (method, kappa), values in aulcs.items():
        for seed, value in zip((1001, 1002), values):
            write_constant(tmp_path / f"kappa{kappa}", HC_BACK_ONE, method, seed, value, kappa=kappa)
    rows, report = summarize.select_kappa(summarize.load_runs(str(tmp_path)))
    # cor: 0.1 (mean 3); ind: 0.01 and 0.05 tie at mean 4 -> the smaller kappa
    assert rows == [{"experiment": "paralysis", "env": "HalfCheetah", "strategy": "back-one", "kappa_cor": "0.1", "kappa_ind": "0.01"}]
    assert any("kappa=0.1: AULC 3.00 (n=2) <- best" in line for line in report)


def test_cli(tmp_path, capsys):
    assert summarize.main([str(tmp_path / "missing")]) == 2
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 1, 1.0)
    out = tmp_path / "table.tex"
    assert summarize.main([str(tmp_path), "--format", "latex", "--output", str(out)]) == 0
    assert "\\begin{tabular}" in out.read_text()
    assert summarize.main([str(tmp_path), "--select-kappa"]) == 1  # no EPPO runs
    assert "no complete EPPO_cor/EPPO_ind runs" in capsys.readouterr().err


def test_identity_from_path_layout():
    assert summarize.identity_from_path("/r/kappa0.1/slippery/Ant/increasing/EPPO_ind/seed12") == (
        runlist.Setting("slippery", "Ant", "increasing"), "EPPO_ind", 12)  # fmt: skip
    assert summarize.kappa_from_path("/r/kappa0.1/slippery/Ant/increasing/EPPO_ind/seed12") == 0.1
    assert summarize.identity_from_path("/r/slippery/Walker/increasing/PPO/seed1") is None
