"""scripts/summarize.py on synthetic run directories with hand-computed metrics and statistics."""

import csv
import dataclasses
import io
import json
import math
import os
import sys

import numpy as np
import pytest
from scipy import stats

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
    # seeds 1, 2
    assert aulc_row.cells[0].mean == pytest.approx(150.0) and final_row.cells[0].mean == pytest.approx(150.0)
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

    # PPO: mean 11.75, se 2.5 / 2; differences 1, 1, 2, 1 -> mean 1.25, sd 0.5, t = 1.25 / (0.5 / 2) = 5,
    # p = P(T_3 > 5) ~ 0.0077 < 0.05
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


# The paper's printed average rows (eppo-paper.tex, Table 1 lines 474-605 and Table 3 lines 658-945).
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
        scores = summarize.average_scores({s: {m: paper[(metric, s, m)][0] for m in methods} for s in settings},
                                          settings)
        # within 1: the paper averaged unrounded means (ours are rounded to integers, error <= 0.5) and rounded the
        # result
        assert np.abs(np.array([scores[m] for m in methods]) - expected).max() <= 1.0
    # Table 3's Final Return ranking row (5.8, 5.3, 6.4, 3.9, 3.9, 1.9, 1.7) sums to 28.9, but the mean ranks of
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
                write_constant(tmp_path, setting, method, seed, value + seed,
                               kappa=0.1 if method == "EPPO_cor" else None)
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
    assert (float(cell["mean"]) == pytest.approx(2002.0)
            and float(cell["se"]) == pytest.approx(np.std([1, 2, 3], ddof=1) / math.sqrt(3)))
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
    assert rows == [{"experiment": "paralysis", "env": "HalfCheetah", "strategy": "back-one", "kappa_cor": "0.1",
                     "kappa_ind": "0.01"}]
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


# ---------------------------------------------------------------- robust statistics (--robust)


def test_iqm_closed_forms_and_scipy_trim_mean():
    assert summarize.iqm(np.arange(1, 9)) == pytest.approx(4.5)  # middle half of 1..8: 3, 4, 5, 6
    assert summarize.iqm([8, 1, 7, 2, 6, 3, 5, 4]) == pytest.approx(4.5)  # order does not matter
    assert summarize.iqm([1, 2, 3, 1000]) == pytest.approx(2.5)  # n = 4: the middle two
    assert summarize.iqm(np.arange(1, 11)) == pytest.approx(5.5)  # n = 10: floor(10/4) = 2 cut at each end -> 3..8
    assert summarize.iqm([5.0, 1.0, 100.0]) == pytest.approx(106 / 3)  # n < 4: nothing cut, the mean
    rng = np.random.default_rng(0)
    for n in range(1, 26):
        x = rng.standard_cauchy(n)  # heavy tails: the mean and the IQM differ a lot
        assert summarize.iqm(x) == pytest.approx(stats.trim_mean(x, 0.25), rel=1e-12, abs=1e-12)
        if n % 4 == 0:  # exactly the mean of the middle 50%
            assert summarize.iqm(x) == pytest.approx(np.sort(x)[n // 4 : 3 * n // 4].mean(), rel=1e-12)
        if n >= 4:  # robust: the largest value can go anywhere above without moving the IQM
            y = x.copy()
            y[np.argmax(y)] = 1e12
            assert summarize.iqm(y) == pytest.approx(summarize.iqm(x), rel=1e-12)
    rows = rng.normal(size=(5, 12))
    assert summarize.iqm(rows) == pytest.approx([summarize.iqm(r) for r in rows])  # row-wise along the last axis
    with pytest.raises(ValueError):
        summarize.iqm([])


def test_bootstrap_resamples_match_the_exact_bootstrap_distribution():
    # n = 3: the 27 index triples are equally likely; the mean of [0, 1, 5] resampled takes each value
    # with the exact probability counted here by brute force.
    x = np.array([0.0, 1.0, 5.0])
    exact = {}
    for i in range(3):
        for j in range(3):
            for k in range(3):
                value = round((x[i] + x[j] + x[k]) / 3, 9)
                exact[value] = exact.get(value, 0) + 1 / 27
    resamples = summarize.stratified_resamples([x], 40_000, np.random.default_rng(1))
    assert resamples.shape == (40_000, 3)
    values, counts = np.unique(np.round(resamples.mean(axis=1), 9), return_counts=True)
    assert set(values) == set(exact)
    assert max(abs(c / 40_000 - exact[v]) for v, c in zip(values, counts)) < 0.01
    # for n < 4 the IQM is the mean; the 2.5% and 97.5% points of the exact distribution are its extremes
    # (each has probability 1/27 > 2.5%)
    assert summarize.bootstrap_interval([x], reps=40_000, seed=1) == pytest.approx((2.0, 0.0, 5.0))


def test_bootstrap_interval_of_the_mean_has_the_normal_width_and_shrinks_with_n():
    rng = np.random.default_rng(2)
    mean = lambda v: np.mean(v, axis=-1)  # noqa: E731
    widths = {}
    for n in (100, 400):
        x = rng.normal(10.0, 3.0, size=n)
        point, low, high = summarize.bootstrap_interval([x], statistic=mean, reps=20_000, seed=0)
        assert point == pytest.approx(x.mean()) and low < point < high
        # the bootstrap distribution of a mean has sd std(x, ddof=0) / sqrt(n) and is close to normal:
        # the 95% percentile interval is about +- 1.96 of it
        half_width = 1.959964 * x.std() / math.sqrt(n)
        assert (high - low) / 2 == pytest.approx(half_width, rel=0.05)
        assert (low + high) / 2 == pytest.approx(x.mean(), abs=0.1 * half_width)
        widths[n] = high - low
    assert widths[400] / widths[100] == pytest.approx(0.5, rel=0.15)  # 1 / sqrt(4)


def test_stratified_bootstrap_keeps_every_settings_share():
    zeros, ones = [0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]
    mean = lambda v: np.mean(v, axis=-1)  # noqa: E731
    # stratified: every resample has 3 runs of the first setting and 5 of the second -> mean 5/8 always
    assert summarize.bootstrap_interval([zeros, ones], statistic=mean, seed=0) == pytest.approx((0.625, 0.625, 0.625))
    point, low, high = summarize.bootstrap_interval([zeros + ones], statistic=mean, seed=0)  # one pooled stratum varies
    assert point == pytest.approx(0.625) and low < 0.5 and high > 0.75
    resamples = summarize.stratified_resamples([[1.0, 2.0], [10.0, 20.0, 30.0]], 500, np.random.default_rng(0))
    assert resamples.shape == (500, 5)
    assert set(np.unique(resamples[:, :2])) == {1.0, 2.0} and set(np.unique(resamples[:, 2:])) == {10.0, 20.0, 30.0}


def test_bootstrap_is_reproducible_and_contains_the_estimate():
    rng = np.random.default_rng(3)
    for _ in range(20):
        strata = [rng.gamma(2.0, 500.0, size=rng.integers(6, 16)) + 2000 * (rng.random() < 0.5)
                  for _ in range(rng.integers(1, 4))]
        first = summarize.bootstrap_interval(strata, seed=7)
        assert summarize.bootstrap_interval(strata, seed=7) == first  # same seed, same numbers, bit for bit
        assert summarize.bootstrap_interval(strata, seed=8) != first
        point, low, high = first
        assert point == pytest.approx(stats.trim_mean(np.concatenate(strata), 0.25))
        assert low <= point <= high


def test_performance_profile_closed_form_and_brute_force():
    fraction, low, high = summarize.performance_profile([[1.0, 2.0, 3.0, 4.0]], [0.0, 1.0, 2.5, 4.0, 5.0], reps=500)
    assert fraction.tolist() == [1.0, 0.75, 0.5, 0.0, 0.0]  # strictly above tau
    # every resample agrees below the minimum / above the maximum
    assert low[0] == high[0] == 1.0 and low[-1] == high[-1] == 0.0
    rng = np.random.default_rng(4)
    strata = [rng.normal(0, 1, size=2), rng.normal(1, 2, size=6)]
    taus = np.linspace(-4, 6, 41)
    fraction, low, high = summarize.performance_profile(strata, taus, reps=1000, seed=0)
    pooled = [v for s in strata for v in s]
    # pooled over runs
    assert fraction.tolist() == pytest.approx([sum(v > t for v in pooled) / len(pooled) for t in taus])
    assert np.all(low <= fraction) and np.all(fraction <= high)
    for curve in (fraction, low, high):  # every resample's profile is non-increasing, so are its percentiles
        assert np.all(np.diff(curve) <= 0) and np.all((curve >= 0) & (curve <= 1))
    again = summarize.performance_profile(strata, taus, reps=1000, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(again, (fraction, low, high)))


def test_minmax_normalize():
    scaled = summarize.minmax_normalize({"PPO": {1: 100.0, 2: 300.0}, "EPPO_ind": {1: 500.0, 2: 200.0}})
    assert scaled == {"PPO": {1: 0.0, 2: 0.5}, "EPPO_ind": {1: 1.0, 2: 0.25}}
    assert summarize.minmax_normalize({"PPO": {1: 7.0, 2: 7.0}}) == {"PPO": {1: 0.5, 2: 0.5}}


def test_robust_section_markdown_and_csv(tmp_path):
    # back-one: PPO 100..800 over seeds 1-8 (IQM = 450), EPPO_ind bimodal; front-one: both; Ant: PPO only
    ppo_back = [100.0 * k for k in range(1, 9)]
    eppo_back = [1000.0, 3000.0, 1100.0, 3100.0, 1200.0, 3200.0, 1300.0, 3300.0]
    ppo_front, eppo_front = [50.0, 60.0, 70.0, 80.0], [500.0, 600.0, 700.0, 800.0]
    ant = runlist.Setting("paralysis", "Ant", "back-one")
    for setting, method, per_seed in ((HC_BACK_ONE, "PPO", ppo_back), (HC_BACK_ONE, "EPPO_ind", eppo_back),
                                      (HC_FRONT_ONE, "PPO", ppo_front), (HC_FRONT_ONE, "EPPO_ind", eppo_front),
                                      (ant, "PPO", [1.0, 2.0])):  # fmt: skip
        for seed, value in enumerate(per_seed, start=1):
            write_constant(tmp_path, setting, method, seed, value, kappa=0.01 if method == "EPPO_ind" else None)
    runs = summarize.load_runs(str(tmp_path))
    options = summarize.RobustOptions(reps=1000, seed=0, threshold=2000.0)
    ((experiment, (aulc, final)),) = summarize.robust_summaries(runs, options)
    assert experiment == "paralysis" and aulc.metric == "aulc" and final.metric == "final_return"
    cell = aulc.cells[(HC_BACK_ONE, "PPO")]
    assert (cell.iqm, cell.n, cell.n_above) == (pytest.approx(450.0), 8, 0)
    assert (cell.low, cell.high) == pytest.approx(summarize.bootstrap_interval([ppo_back], reps=1000, seed=0)[1:])
    assert aulc.cells[(HC_BACK_ONE, "EPPO_ind")].n_above == 4  # the bimodality the mean hides
    assert aulc.comparable == [HC_BACK_ONE, HC_FRONT_ONE]  # Ant has no EPPO_ind: not in the aggregate
    aggregate = aulc.aggregate["EPPO_ind"]
    assert aggregate.n_runs == 12 and aggregate.iqm == pytest.approx(stats.trim_mean(eppo_back + eppo_front, 0.25))
    assert (aggregate.low, aggregate.high) == pytest.approx(
        summarize.bootstrap_interval([eppo_back, eppo_front], reps=1000, seed=0)[1:])

    text = summarize.render_robust_markdown([(experiment, [aulc, final])], options, 0)
    assert "| HalfCheetah | back-one | 450 [" in text and "(n=8), 0/8 > 2000 |" in text
    assert "(n=8), 4/8 > 2000 |" in text
    assert "| HalfCheetah | back-one | EPPO_ind | 8 | 4 | 1: 1000, 2: 3000, 3: 1100," in text
    assert "| Aggregate IQM | 2 settings, raw returns |" in text
    assert "leaves out the settings where some method has no results: paralysis/Ant/back-one" in text

    normalized = summarize.robust_summaries(runs, summarize.RobustOptions(reps=200, normalize="minmax"))[0][1][0]
    # min-max per setting over both methods: back-one spans 100..3300, front-one 50..800
    expected = [(v - 100) / 3200 for v in eppo_back] + [(v - 50) / 750 for v in eppo_front]
    assert normalized.aggregate["EPPO_ind"].iqm == pytest.approx(stats.trim_mean(expected, 0.25))
    assert 0 <= normalized.aggregate["PPO"].low <= normalized.aggregate["PPO"].high <= 1

    rows = list(csv.DictReader(io.StringIO(summarize.render_csv(runs, None, options))))
    assert list(rows[0]) == summarize.CSV_FIELDS + summarize.ROBUST_CSV_FIELDS
    row = next(r for r in rows if r["row"] == "cell" and r["metric"] == "aulc" and r["strategy"] == "back-one"
               and r["method"] == "EPPO_ind")
    assert float(row["iqm"]) == pytest.approx(stats.trim_mean(eppo_back, 0.25)) and row["n_above"] == "4"
    assert (row["seed_values"].split(";")[:2] == ["1:1000.0", "2:3000.0"]
            and float(row["mean"]) == pytest.approx(np.mean(eppo_back)))
    aggregates = [r for r in rows if r["row"] == "aggregate_iqm"]
    assert [(r["metric"], r["method"], r["n"], r["env"]) for r in aggregates] == [
        ("aulc", "PPO", "12", "all"), ("aulc", "EPPO_ind", "12", "all"),
        ("final_return", "PPO", "12", "all"), ("final_return", "EPPO_ind", "12", "all")
    ]  # fmt: skip
    # without --robust the CSV keeps its columns exactly
    assert summarize.render_csv(runs, None).splitlines()[0] == ",".join(summarize.CSV_FIELDS)


def test_robust_cli(tmp_path, capsys):
    for seed in (1, 2, 3, 4):
        write_constant(tmp_path, HC_BACK_ONE, "PPO", seed, 1000.0 * seed)
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 5, 1.0, finished=False)
    out = tmp_path / "table.md"
    assert summarize.main([str(tmp_path), "--robust", "--threshold", "2500", "--bootstrap-reps", "100",
                           "--output", str(out)]) == 0
    text = out.read_text()
    # the paper's table first, then the robust section, then the runs left out
    assert (text.index("Mean ± standard error") < text.index("robust statistics")
            < text.index("## Incomplete or excluded runs"))
    assert ("| HalfCheetah | back-one | 2500 [" in text and "(n=4), 2/4 > 2500 |" in text
            and "over 100 bootstrap resamples" in text)
    same = tmp_path / "again.md"
    assert summarize.main([str(tmp_path), "--robust", "--threshold", "2500", "--bootstrap-reps", "100",
                           "--output", str(same)]) == 0
    assert same.read_text() == text  # fixed bootstrap seed: the same file
    assert summarize.main([str(tmp_path), "--threshold", "1"]) == 2
    assert "only apply with --robust" in capsys.readouterr().err
    assert summarize.main([str(tmp_path), "--robust", "--format", "latex"]) == 2
    assert summarize.main([str(tmp_path), "--robust", "--bootstrap-reps", "0"]) == 2


# ---------------------------------------------------------------- the runs of a cell must agree (config.json)


@pytest.fixture(scope="module")
def scripts():
    """The real algorithm scripts, whose Args and config.json entries the runs below record."""
    import eppo_continuous
    import ppo_continuous

    return {"PPO": ppo_continuous, "EPPO": eppo_continuous, "metadata": ppo_continuous.run_metadata()}


def write_script_run(scripts, run_dir, module, seed, value, *, steps_per_task=256, num_tasks=2, eval_frequency=128,
                     **flags):
    """A finished run whose config.json holds what `module` records (open_outputs): every Args field, at its default
    but `flags`, and config.json's own entries; every evaluation returns `value` (AULC = Final Return = value)."""
    import nonstationary_envs

    args = scripts[module].Args(seed=seed, steps_per_task=steps_per_task, num_tasks=num_tasks,
                                eval_frequency=eval_frequency, run_dir=str(run_dir), **flags)  # fmt: skip
    method = scripts[module].method_name(args)
    write_run(str(run_dir), method=method, seed=seed, steps_per_task=steps_per_task, num_tasks=num_tasks,
              eval_frequency=eval_frequency, returns=lambda step, task: value)  # fmt: skip
    schedule = nonstationary_envs.task_schedule(args.env_id, args.experiment, args.strategy)
    config = {"args": dataclasses.asdict(args), "script": os.path.basename(scripts[module].__file__), "method": method,
              "run_name": f"{args.env_id}__{args.experiment}__{args.strategy}__{args.exp_name}__{seed}",
              "num_tasks": num_tasks, "total_steps": steps_per_task * num_tasks,
              "schedule": [str(p) for p in schedule[:num_tasks]],
              "device": "cpu", **scripts["metadata"]}  # fmt: skip
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return str(run_dir)


def edit_config(run_dir, edit):
    path = os.path.join(run_dir, "config.json")
    with open(path) as f:
        config = json.load(f)
    edit(config)
    with open(path, "w") as f:
        json.dump(config, f)


def four_run_root(scripts, root):
    """The root of the report: two PPO runs, at the defaults and with --no-norm-reward --learning-rate 0.001, and two
    EPPO_ind runs, with --steps-per-task 1024 and 2048 (seeds 1 and 2 of each method)."""
    def where(name, method, seed):
        return run_path(root / name, HC_BACK_ONE, method, seed)

    return {
        "ppo_default": write_script_run(scripts, where("ppo_default", "PPO", 1), "PPO", 1, 100.0),
        "ppo_lr": write_script_run(scripts, where("ppo_lr", "PPO", 2), "PPO", 2, 300.0, norm_reward=False,
                                   learning_rate=0.001),
        "eppo_1024": write_script_run(scripts, where("eppo_1024", "EPPO_ind", 1), "EPPO", 1, 200.0, variant="ind",
                                      steps_per_task=1024, eval_frequency=512),
        "eppo_2048": write_script_run(scripts, where("eppo_2048", "EPPO_ind", 2), "EPPO", 2, 400.0, variant="ind",
                                      steps_per_task=2048, eval_frequency=512),
    }  # fmt: skip


def test_the_four_run_root_stops_with_one_line_per_configuration(scripts, tmp_path, capsys):
    dirs = four_run_root(scripts, tmp_path)
    runs = summarize.load_runs(str(tmp_path))
    assert all(run.complete for run in runs), [run.problems for run in runs]
    # without the check they pool into one PPO and one EPPO_ind cell of 2 seeds, as the report says
    tables, _ = summarize.build_tables(runs)
    assert tables[0].columns == ["PPO", "EPPO_ind"] and set(tables[0].seed_counts) == {2}

    conflicts = summarize.config_conflicts(runs)
    assert [(c.setting, c.label) for c in conflicts] == [(HC_BACK_ONE, "PPO"), (HC_BACK_ONE, "EPPO_ind")]
    assert [[g.shown for g in c.groups] for c in conflicts] == [
        [{"learning_rate": "0.0003", "norm_reward": "True"}, {"learning_rate": "0.001", "norm_reward": "False"}],
        [{"steps_per_task": "1024", "total_steps": "2048"}, {"steps_per_task": "2048", "total_steps": "4096"}],
    ]

    out = tmp_path / "table.md"
    assert summarize.main([str(tmp_path), "--output", str(out)]) == 2
    captured = capsys.readouterr()
    assert not out.exists() and captured.out == ""
    header, *lines = captured.err.strip().split("\n")
    assert header.startswith("error: the runs of 2 cell(s) differ in config.json") and "--split-by-config" in header
    assert lines == [
        f"paralysis/HalfCheetah/back-one PPO: learning_rate=0.0003, norm_reward=True: {dirs['ppo_default']}",
        f"paralysis/HalfCheetah/back-one PPO: learning_rate=0.001, norm_reward=False: {dirs['ppo_lr']}",
        f"paralysis/HalfCheetah/back-one EPPO_ind: steps_per_task=1024, total_steps=2048: {dirs['eppo_1024']}",
        f"paralysis/HalfCheetah/back-one EPPO_ind: steps_per_task=2048, total_steps=4096: {dirs['eppo_2048']}",
    ]
    for flags in (["--format", "csv"], ["--format", "latex"], ["--robust"], ["--select-kappa"]):  # every output checks
        assert summarize.main([str(tmp_path), *flags]) == 2, flags
    assert summarize.main([str(tmp_path), "--methods", "PPO"]) == 2
    assert summarize.main([str(tmp_path), "--methods", "EPPO_ind,CB", "--format", "csv"]) == 2
    capsys.readouterr()


def test_split_by_config_shows_each_configuration_as_its_own_column(scripts, tmp_path, capsys):
    four_run_root(scripts, tmp_path)
    out = tmp_path / "table.md"
    assert summarize.main([str(tmp_path), "--split-by-config", "--output", str(out)]) == 0
    text = out.read_text()
    header = next(line for line in text.splitlines() if line.startswith("| Metric"))
    assert header == ("| Metric | Environment | Strategy | PPO [learning_rate=0.0003, norm_reward=True] | "
                      "PPO [learning_rate=0.001, norm_reward=False] | "
                      "EPPO_ind [steps_per_task=1024, total_steps=2048] | "
                      "EPPO_ind [steps_per_task=2048, total_steps=4096] |")  # fmt: skip
    row = next(line for line in text.splitlines() if line.startswith("| AULC"))
    # each its own run
    assert row == "| AULC (↑) | HalfCheetah | back-one | 100 ± nan | 300 ± nan | 200 ± nan | **400 ± nan** |"
    assert "Seeds per cell: 1." in text

    rows = list(csv.DictReader(io.StringIO(summarize.render_csv(summarize.load_runs(str(tmp_path)), None,
                                                                split_by_config=True))))
    cells = {r["method"]: float(r["mean"]) for r in rows if r["row"] == "cell" and r["metric"] == "aulc"}
    assert cells == {"PPO [learning_rate=0.0003, norm_reward=True]": 100.0,
                     "PPO [learning_rate=0.001, norm_reward=False]": 300.0,
                     "EPPO_ind [steps_per_task=1024, total_steps=2048]": 200.0,
                     "EPPO_ind [steps_per_task=2048, total_steps=4096]": 400.0}  # fmt: skip


def test_split_cells_are_tested_against_each_other_and_keep_their_seeds(tmp_path):
    # the same seeds 1-4 at two learning rates: without --split-by-config they would look like duplicate seeds
    low, high = [10.0, 12.0, 14.0, 16.0], [9.0, 11.0, 12.0, 15.0]  # differences 1, 1, 2, 1: t = 5, p = P(T_3 > 5)
    for name, lr, values in (("a", 0.0003, low), ("b", 0.001, high)):
        for seed, value in enumerate(values, start=1):
            directory = run_path(tmp_path / name, HC_BACK_ONE, "PPO", seed)
            write_constant(tmp_path / name, HC_BACK_ONE, "PPO", seed, value)
            edit_config(directory, lambda config: config["args"].update(learning_rate=lr))
    runs = summarize.load_runs(str(tmp_path))
    (conflict,) = summarize.config_conflicts(runs)
    assert [len(g.runs) for g in conflict.groups] == [4, 4]
    groups, left_out = summarize.group_runs(runs, split_by_config=True)
    assert not left_out and sorted(label for _, label in groups) == ["PPO [learning_rate=0.0003]",
                                                                     "PPO [learning_rate=0.001]"]
    summary = summarize.summarize_metric(groups, "aulc", "paralysis", None)
    best, other = (summary.cells[(HC_BACK_ONE, "PPO [learning_rate=0.0003]")],
                   summary.cells[(HC_BACK_ONE, "PPO [learning_rate=0.001]")])
    assert best.best and best.n == 4 and other.n == 4
    assert other.p_value == pytest.approx(student_t3_sf(5.0), rel=1e-9) and not other.not_worse


def test_bookkeeping_keys_may_differ_and_are_what_the_scripts_record(scripts, tmp_path, capsys):
    first = write_script_run(scripts, run_path(tmp_path / "a", HC_BACK_ONE, "PPO", 1), "PPO", 1, 10.0)
    second = write_script_run(scripts, run_path(tmp_path / "b", HC_BACK_ONE, "PPO", 2), "PPO", 2, 20.0)
    with open(os.path.join(first, "config.json")) as f:
        config = json.load(f)
    recorded = set(config["args"]) | set(config)
    # each bookkeeping key is a key the scripts write (no typo, no stale name), or a retired flag older runs wrote ...
    retired = {"trust_checkpoint"}  # v0.1-v0.4's
    assert set(summarize.BOOKKEEPING_KEYS) - retired <= recorded and not retired & recorded, \
        set(summarize.BOOKKEEPING_KEYS) - recorded
    assert all(isinstance(why, str) and why for why in summarize.BOOKKEEPING_KEYS.values())

    def change_every_bookkeeping_key(config):
        for place in (config["args"], config):
            for key in summarize.BOOKKEEPING_KEYS:
                if key in place and key != "seed":
                    value = place[key]
                    place[key] = ((not value) if isinstance(value, bool)
                                  else f"{value}-other" if isinstance(value, str) or value is None else value + 1)

    edit_config(second, change_every_bookkeeping_key)
    # ... and none makes two runs different experiments
    runs = summarize.load_runs(str(tmp_path))
    assert all(run.complete for run in runs) and summarize.config_conflicts(runs) == []
    out = tmp_path / "table.md"
    assert summarize.main([str(tmp_path), "--output", str(out)]) == 0
    assert ("| AULC (↑) | HalfCheetah | back-one | **15.00 ± 5.00** |" in out.read_text()
            and "Seeds per cell: 2." in out.read_text())


def test_every_other_flag_and_entry_of_config_json_must_agree(scripts, tmp_path):
    write_script_run(scripts, run_path(tmp_path / "a", HC_BACK_ONE, "PPO", 1), "PPO", 1, 10.0)
    other = write_script_run(scripts, run_path(tmp_path / "b", HC_BACK_ONE, "PPO", 2), "PPO", 2, 20.0)
    with open(os.path.join(other, "config.json")) as f:
        original = f.read()
    config = json.loads(original)
    bookkeeping = set(summarize.BOOKKEEPING_KEYS)
    identity = {"env_id", "experiment", "strategy", "method"}  # they choose the cell itself: another cell, never pooled
    length = {"steps_per_task", "num_tasks", "eval_frequency", "total_steps"}  # the evaluation rows follow them: below
    checked = [("args", k) for k in config["args"] if k not in bookkeeping | identity | length]
    checked += [("top", k) for k in config if k not in bookkeeping | identity | length | {"args"}]
    assert ({"learning_rate", "norm_reward", "plasticity_states", "eval_episodes", "script", "schedule"}
            <= {k for _, k in checked})
    fields = {f.name for f in dataclasses.fields(scripts["PPO"].Args)}  # every flag of PPO but those three kinds
    assert {k for _, k in checked} == (fields - bookkeeping - identity - length) | {"script", "schedule"}

    def changed(value):
        if isinstance(value, bool):
            return not value
        if value is None:
            return 1
        if isinstance(value, (int, float)):
            return value + 1
        return value + ["x"] if isinstance(value, list) else f"{value}x"

    def change(config):
        target = config["args"] if place == "args" else config
        target[key] = changed(target[key])

    for place, key in checked:
        edit_config(other, change)
        runs = summarize.load_runs(str(tmp_path))
        assert all(run.complete for run in runs), (key, [run.problems for run in runs])
        (conflict,) = summarize.config_conflicts(runs)
        assert [list(g.shown) for g in conflict.groups] == [[key], [key]], key
        with open(os.path.join(other, "config.json"), "w") as f:  # back to the run's own config
            f.write(original)
    assert summarize.config_conflicts(summarize.load_runs(str(tmp_path))) == []
    edit_config(other, lambda config: config.update(method="PPOx"))  # another method's runs are another cell
    runs = summarize.load_runs(str(tmp_path))
    assert {run.method for run in runs} == {"PPO", "PPOx"} and summarize.config_conflicts(runs) == []


@pytest.mark.parametrize("first, second, differing", [
    ({"steps_per_task": 100}, {"steps_per_task": 200}, ["steps_per_task", "total_steps"]),
    ({"num_tasks": 2}, {"num_tasks": 1}, ["num_tasks", "schedule", "total_steps"]),
    ({"eval_frequency": 50}, {"eval_frequency": 25}, ["eval_frequency"]),
])  # fmt: skip
def test_schedule_and_length_must_agree(scripts, tmp_path, first, second, differing):
    for seed, flags in ((1, first), (2, second)):
        write_script_run(scripts, run_path(tmp_path, HC_BACK_ONE, "PPO", seed), "PPO", seed, 1.0,
                         **({"steps_per_task": 100, "num_tasks": 2, "eval_frequency": 50} | flags))  # fmt: skip
    runs = summarize.load_runs(str(tmp_path))
    assert all(run.complete for run in runs), [run.problems for run in runs]
    (conflict,) = summarize.config_conflicts(runs)
    assert sorted(conflict.groups[0].shown) == differing


def test_a_key_one_run_lacks_is_a_difference(tmp_path, capsys):
    # a run from before a flag existed (here vf_coef), and one from before a config.json entry existed
    for seed in (1, 2, 3):
        write_constant(tmp_path, HC_BACK_ONE, "PPO", seed, float(seed))
    edit_config(run_path(tmp_path, HC_BACK_ONE, "PPO", 1), lambda config: config["args"].update(vf_coef=0.5))
    edit_config(run_path(tmp_path, HC_BACK_ONE, "PPO", 2), lambda config: config["args"].update(vf_coef=0.5))
    (conflict,) = summarize.config_conflicts(summarize.load_runs(str(tmp_path)))
    assert [(g.shown, len(g.runs)) for g in conflict.groups] == [({"vf_coef": "0.5"}, 2), ({"vf_coef": "(absent)"}, 1)]
    assert summarize.main([str(tmp_path)]) == 2
    assert f"PPO: vf_coef=(absent): {run_path(tmp_path, HC_BACK_ONE, 'PPO', 3)}" in capsys.readouterr().err
    assert summarize.main([str(tmp_path), "--split-by-config", "--format", "markdown"]) == 0
    assert "| PPO [vf_coef=(absent)] | PPO [vf_coef=0.5] |" in capsys.readouterr().out
    # values compare as JSON values: 2 and 2.0 agree, true and 1 do not
    for seed, value in ((1, 2), (2, 2.0), (3, 2)):
        edit_config(run_path(tmp_path, HC_BACK_ONE, "PPO", seed),
                    lambda config: config["args"].update(vf_coef=value, x=True if seed < 3 else 1))
    (conflict,) = summarize.config_conflicts(summarize.load_runs(str(tmp_path)))
    assert [g.shown for g in conflict.groups] == [{"x": "True"}, {"x": "1"}]


@pytest.mark.parametrize("content, reason", [
    (None, "no config.json"),
    ("", "unreadable config.json"),
    ("{not json", "unreadable config.json"),
    (b"\xff\xfe\x00binary", "unreadable config.json"),
    ("[1, 2]", "malformed config.json (a JSON list, not an object)"),
    ("null", "malformed config.json (a JSON NoneType, not an object)"),
    ('{"args": [1]}', "malformed config.json (its args is not an object)"),
    ("{}", "config.json lacks a valid 'experiment'"),
    ("SEED", "config.json lacks a valid"),
    ("EVAL0", "must be positive"),
    ("METHOD", "malformed config.json (script, method or variant not a string)"),
    ("KAPPA", "malformed config.json (kappa 'big' is not a number)"),
    ("DIR", "unreadable config.json"),
])  # fmt: skip
def test_a_missing_or_malformed_config_is_listed_with_the_unfinished_runs(tmp_path, capsys, content, reason):
    for seed in (1, 2):
        write_constant(tmp_path, HC_BACK_ONE, "PPO", seed, 10.0 * seed)
    bad = run_path(tmp_path, HC_BACK_ONE, "PPO", 3)
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 3, 999.0)
    path = os.path.join(bad, "config.json")
    edits = {"SEED": lambda c: c["args"].update(seed="three"), "EVAL0": lambda c: c["args"].update(eval_frequency=0),
             "METHOD": lambda c: c.update(method=5), "KAPPA": lambda c: c["args"].update(kappa="big")}  # fmt: skip
    if content in edits:
        edit_config(bad, edits[content])
    else:
        os.remove(path)
        if content == "DIR":
            os.makedirs(path)
        elif isinstance(content, bytes):
            open(path, "wb").write(content)
        elif content is not None:
            open(path, "w").write(content)
    out = tmp_path / "table.md"
    assert summarize.main([str(tmp_path), "--output", str(out)]) == 0
    text = out.read_text()
    assert "| AULC (↑) | HalfCheetah | back-one | **15.00 ± 5.00** |" in text  # the 999 run is not averaged
    left_out = text[text.index("## Incomplete or excluded runs"):]
    (line,) = [line for line in left_out.splitlines() if bad in line]
    assert reason in line
    assert summarize.main([str(tmp_path), "--format", "csv"]) == 0
    assert reason in capsys.readouterr().err


# ---------------------------------------------------------------- p-values and plain text


def p_value_root(tmp_path):
    # as test_cell_statistics_and_significance
    values = {"EPPO_ind": [10, 12, 14, 16], "PPO": [9, 11, 12, 15], "PFO": [11, 10, 15, 14]}
    for method, per_seed in values.items():
        for seed, value in enumerate(per_seed, start=1):
            write_constant(tmp_path, HC_BACK_ONE, method, seed, float(value))
    write_constant(tmp_path, HC_BACK_ONE, "CB", 1, 1.0)  # one seed: no t-test
    return str(tmp_path)


def test_p_values_follow_each_tested_cell(tmp_path, capsys):
    root = p_value_root(tmp_path)
    assert summarize.main([root, "--format", "markdown"]) == 0
    plain = capsys.readouterr().out
    assert "(p=" not in plain
    assert summarize.main([root, "--format", "markdown", "--p-values"]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("| AULC"))
    ppo, pfo = f"{student_t3_sf(5.0):.3g}", f"{student_t3_sf(1 / math.sqrt(3)):.3g}"
    assert ppo == "0.0077" and pfo == "0.302"
    # columns PPO, PFO, CB, EPPO_ind: the best has no p-value, CB (one seed) was not tested
    assert row == (f"| AULC (↑) | HalfCheetah | back-one | 11.75 ± 1.25 (n=4) (p={ppo}) | "
                   f"<u>12.50 ± 1.19 (n=4)</u> (p={pfo}) | "
                   "1.00 ± nan (n=1) (no t-test) | **13.00 ± 1.29 (n=4)** |")  # fmt: skip
    assert "(p=…): that test's p-value against the best cell of the same setting" in text
    # the table
    assert (text.replace(f" (p={ppo})", "").replace(f" (p={pfo})", "").replace(" (no t-test)", "").split("\n")[:7]
            == plain.split("\n")[:7])
    assert summarize.main([root, "--format", "latex", "--p-values"]) == 0
    assert f"$11.75\\sd{{\\pm 1.25}}\\sd{{\\,(n=4)}}$ {{\\scriptsize (p={ppo})}}" in capsys.readouterr().out
    assert summarize.main([root, "--format", "csv", "--p-values"]) == 2
    assert summarize.main([root, "--select-kappa", "--p-values"]) == 2
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 2 and all(line.startswith("error: --p-values applies to --format markdown, text or latex")
                                 for line in err)


def test_text_format_has_no_markup_and_marks_best_and_not_worse(tmp_path, capsys):
    root = p_value_root(tmp_path)
    assert summarize.main([root, "--format", "text", "--p-values"]) == 0
    text = capsys.readouterr().out
    assert "<u>" not in text and "**" not in text and "|" not in text and "---|" not in text
    lines = text.splitlines()
    assert lines[:2] == ["paralysis", "========="]
    header = next(line for line in lines if line.startswith("Metric"))
    row = next(line for line in lines if line.startswith("AULC"))
    columns = ["PPO", "PFO", "CB", "EPPO_ind"]
    starts = [header.index(c) for c in columns]
    cells = [row[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
    assert cells == ["11.75 ± 1.25 (n=4) (p=0.0077)", "12.50 ± 1.19 (n=4) ~ (p=0.302)", "1.00 ± nan (n=1) (no t-test)",
                     "13.00 ± 1.29 (n=4) *"]
    rule = lines[lines.index(header) + 1]
    assert set(rule) == {"-", " "} and len(rule) >= len(header)
    assert any(line.startswith("Mean ± standard error over seeds; *: highest mean; ~: not significantly worse than "
                               "the best") for line in lines)
    # the runs left out, and the robust section, as text too
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 9, 1.0, finished=False)
    assert summarize.main([root, "--format", "text", "--robust", "--bootstrap-reps", "20"]) == 0
    text = capsys.readouterr().out
    assert "|" not in text and "<u>" not in text and "**" not in text
    assert "Incomplete or excluded runs (not in the tables)" in text and "not finished (no summary.json)" in text
    assert "paralysis: robust statistics (IQM, stratified bootstrap)" in text


def test_markdown_stays_the_default_but_on_a_terminal(tmp_path, capsys, monkeypatch):
    for seed, (a, b) in enumerate(((1.0, 2.0), (3.0, 2.5)), start=1):
        write_constant(tmp_path, HC_BACK_ONE, "PPO", seed, a)
        write_constant(tmp_path, HC_BACK_ONE, "EPPO_ind", seed, b, kappa=0.01)
    expected = "\n".join([
        "## paralysis", "",
        "| Metric | Environment | Strategy | PPO | EPPO_ind |",
        "|---|---|---|:---:|:---:|",
        "| AULC (↑) | HalfCheetah | back-one | <u>2.00 ± 1.00</u> | **2.25 ± 0.25** |",
        "| Final Return (↑) | HalfCheetah | back-one | <u>2.00 ± 1.00</u> | **2.25 ± 0.25** |", "",
        "Mean ± standard error over seeds; **bold**: highest mean; <u>underlined</u>: not significantly worse than the "
        "best (one-sided paired t-test over seeds, p ≥ 0.05). Seeds per cell: 2.",
        "- Fewer than 5 seeds in a cell (the fewest: 2): the t-tests behind the marks mean little there; a claim needs "
        "at least 5 seeds per cell.", "",
    ])  # one setting: no Average or Overall rows, which would repeat its row  # fmt: skip
    assert summarize.main([str(tmp_path)]) == 0  # stdout is not a terminal under pytest
    assert capsys.readouterr().out == expected
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert summarize.main([str(tmp_path)]) == 0
    on_terminal = capsys.readouterr().out
    assert "<u>" not in on_terminal and "2.00 ± 1.00 ~" in on_terminal and "2.25 ± 0.25 *" in on_terminal
    assert summarize.main([str(tmp_path), "--format", "markdown"]) == 0
    assert capsys.readouterr().out == expected
    out = tmp_path / "table.md"
    assert summarize.main([str(tmp_path), "--output", str(out)]) == 0  # a file is Markdown, also from a terminal
    assert out.read_text() == expected


@pytest.mark.parametrize("argv, names", [
    (["--format", "html"], ["--format", "'markdown', 'text', 'csv', 'latex'"]),
    (["--normalize", "zscore", "--robust"], ["--normalize", "'none', 'minmax'"]),
    (["--decimals", "two"], ["--decimals", "'two'"]),
    (["--split-by-config", "--select-kappa"], ["--split-by-config", "--select-kappa"]),
])  # fmt: skip
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, argv, names):
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 1, 1.0)
    assert summarize.main([str(tmp_path), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith("error: ") and all(name in captured.err for name in names)


@pytest.mark.parametrize("seeds", [(1, 2, 3, 4), (1, 2, 3, 4, 5)])
def test_averages_need_two_settings_and_few_seeds_are_named(tmp_path, capsys, seeds):
    """One setting: no Average or Overall rows (and no Average columns in the slippery layout), which would only
    repeat it; below 5 seeds per cell one line says the tests mean little there, at 5 none (--robust likewise)."""
    slippery = runlist.Setting("slippery", "Ant", "increasing")
    for setting in (HC_BACK_ONE, slippery):
        for method, value in (("PPO", 2.0), ("EPPO_cor", 3.0)):
            for seed in seeds:
                write_constant(tmp_path, setting, method, seed, value + 0.1 * seed,
                               kappa=0.1 if method == "EPPO_cor" else None)
    tables, _ = summarize.build_tables(summarize.load_runs(str(tmp_path)))
    paralysis, = (t for t in tables if t.experiment == "paralysis")
    slippery_table, = (t for t in tables if t.experiment == "slippery")
    assert [r.labels for r in paralysis.rows] == [["AULC (↑)", "HalfCheetah", "back-one"],
                                                  ["Final Return (↑)", "HalfCheetah", "back-one"]]
    assert slippery_table.column_groups == [("increasing", 1)] and slippery_table.columns == ["Ant"]
    assert all(len(r.cells) == 1 for r in slippery_table.rows)
    assert summarize.main([str(tmp_path), "--format", "markdown", "--robust", "--bootstrap-reps", "10"]) == 0
    few = [line for line in summarize.render_markdown(tables, [], 2).splitlines() if "Fewer than 5 seeds" in line]
    assert few == ([] if len(seeds) >= 5 else
                   [f"- Fewer than 5 seeds in a cell (the fewest: {len(seeds)}): the t-tests "
                    "behind the marks mean little there; a claim needs at least 5 seeds per cell."] * 2)
    robust_notes = capsys.readouterr().out.count("the bootstrap intervals mean little there")
    assert robust_notes == (0 if len(seeds) >= 5 else 2)  # one per experiment
    # a second HalfCheetah setting brings the HalfCheetah Average row and the Overall rows back
    for method, value in (("PPO", 2.0), ("EPPO_cor", 3.0)):
        for seed in seeds:
            write_constant(tmp_path, HC_FRONT_ONE, method, seed, value, kappa=0.1 if method == "EPPO_cor" else None)
    tables, _ = summarize.build_tables(summarize.load_runs(str(tmp_path)))
    labels = [r.labels[1] or r.labels[2] for t in tables if t.experiment == "paralysis" for r in t.rows][:5]
    assert labels == ["HalfCheetah", "front-one", "Average", "Overall Average", "Overall Average Ranking"]
