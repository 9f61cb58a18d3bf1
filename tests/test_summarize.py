"""scripts/summarize.py on synthetic run directories with hand-computed metrics and statistics."""

import csv
import io
import math
import os

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
        strata = [rng.gamma(2.0, 500.0, size=rng.integers(6, 16)) + 2000 * (rng.random() < 0.5) for _ in range(rng.integers(1, 4))]
        first = summarize.bootstrap_interval(strata, seed=7)
        assert summarize.bootstrap_interval(strata, seed=7) == first  # same seed, same numbers, bit for bit
        assert summarize.bootstrap_interval(strata, seed=8) != first
        point, low, high = first
        assert point == pytest.approx(stats.trim_mean(np.concatenate(strata), 0.25))
        assert low <= point <= high


def test_performance_profile_closed_form_and_brute_force():
    fraction, low, high = summarize.performance_profile([[1.0, 2.0, 3.0, 4.0]], [0.0, 1.0, 2.5, 4.0, 5.0], reps=500)
    assert fraction.tolist() == [1.0, 0.75, 0.5, 0.0, 0.0]  # strictly above tau
    assert low[0] == high[0] == 1.0 and low[-1] == high[-1] == 0.0  # every resample agrees below the minimum / above the maximum
    rng = np.random.default_rng(4)
    strata = [rng.normal(0, 1, size=2), rng.normal(1, 2, size=6)]
    taus = np.linspace(-4, 6, 41)
    fraction, low, high = summarize.performance_profile(strata, taus, reps=1000, seed=0)
    pooled = [v for s in strata for v in s]
    assert fraction.tolist() == pytest.approx([sum(v > t for v in pooled) / len(pooled) for t in taus])  # pooled over runs
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
    assert (aggregate.low, aggregate.high) == pytest.approx(summarize.bootstrap_interval([eppo_back, eppo_front], reps=1000, seed=0)[1:])

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
    row = next(r for r in rows if r["row"] == "cell" and r["metric"] == "aulc" and r["strategy"] == "back-one" and r["method"] == "EPPO_ind")
    assert float(row["iqm"]) == pytest.approx(stats.trim_mean(eppo_back, 0.25)) and row["n_above"] == "4"
    assert row["seed_values"].split(";")[:2] == ["1:1000.0", "2:3000.0"] and float(row["mean"]) == pytest.approx(np.mean(eppo_back))
    aggregates = [r for r in rows if r["row"] == "aggregate_iqm"]
    assert [(r["metric"], r["method"], r["n"], r["env"]) for r in aggregates] == [
        ("aulc", "PPO", "12", "all"), ("aulc", "EPPO_ind", "12", "all"), ("final_return", "PPO", "12", "all"), ("final_return", "EPPO_ind", "12", "all")
    ]  # fmt: skip
    # without --robust the CSV keeps its columns exactly
    assert summarize.render_csv(runs, None).splitlines()[0] == ",".join(summarize.CSV_FIELDS)


def test_robust_cli(tmp_path, capsys):
    for seed in (1, 2, 3, 4):
        write_constant(tmp_path, HC_BACK_ONE, "PPO", seed, 1000.0 * seed)
    write_constant(tmp_path, HC_BACK_ONE, "PPO", 5, 1.0, finished=False)
    out = tmp_path / "table.md"
    assert summarize.main([str(tmp_path), "--robust", "--threshold", "2500", "--bootstrap-reps", "100", "--output", str(out)]) == 0
    text = out.read_text()
    # the paper's table first, then the robust section, then the runs left out
    assert text.index("Mean ± standard error") < text.index("robust statistics") < text.index("## Incomplete or excluded runs")
    assert "| HalfCheetah | back-one | 2500 [" in text and "(n=4), 2/4 > 2500 |" in text and "over 100 bootstrap resamples" in text
    same = tmp_path / "again.md"
    assert summarize.main([str(tmp_path), "--robust", "--threshold", "2500", "--bootstrap-reps", "100", "--output", str(same)]) == 0
    assert same.read_text() == text  # fixed bootstrap seed: the same file
    assert summarize.main([str(tmp_path), "--threshold", "1"]) == 2
    assert "only apply with --robust" in capsys.readouterr().err
    assert summarize.main([str(tmp_path), "--robust", "--format", "latex"]) == 2
    assert summarize.main([str(tmp_path), "--robust", "--bootstrap-reps", "0"]) == 2
