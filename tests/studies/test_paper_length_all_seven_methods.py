"""The study "the paper's seven methods at its length", studies/2026-12-01_paper_length_all_seven_methods/:
analyze.py on hand-made runs with known answers, and its committed tables held to the README's commands."""

import importlib.util
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from fake_algorithm import write_run
from tiny_run import REPO_ROOT

spec = importlib.util.spec_from_file_location(
    "baselines_analyze", os.path.join(REPO_ROOT, "studies", "2026-12-01_paper_length_all_seven_methods", "analyze.py"))
analyze = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analyze)
STUDY = os.path.join(REPO_ROOT, "studies", "2026-12-01_paper_length_all_seven_methods")


def test_the_significance_matrix_is_the_one_sided_paired_test_of_row_better_than_column():
    """Brute force with scipy: entry (i, j) is ttest_rel(row, column, alternative) over the seeds, 'greater' for
    the ranks and 'less' for dormant units (fewer is better); only j < i is filled."""
    rng = np.random.default_rng(0)
    values = {m: {seed: float(rng.normal(i, 1.0)) for seed in range(1, 9)} for i, m in enumerate(analyze.METHODS)}
    for higher, alternative in ((True, "greater"), (False, "less")):
        rows = analyze.lower_triangle(values, higher)
        assert [row for row, _ in rows] == list(analyze.METHODS)
        for i, (row, cells) in enumerate(rows):
            assert len(cells) == i
            for column, p in zip(analyze.METHODS, cells):
                a, b = [values[row][s] for s in range(1, 9)], [values[column][s] for s in range(1, 9)]
                assert p == pytest.approx(stats.ttest_rel(a, b, alternative=alternative).pvalue, rel=1e-12)


def test_a_methods_level_is_the_welch_test_against_the_papers_seeds():
    assert analyze.level(0.05, 100.0, 200.0) == "at"
    assert analyze.level(0.049, 100.0, 200.0) == "below"
    assert analyze.level(0.01, 300.0, 200.0) == "above"


def runs_with_aulc(means: dict, spread=30.0) -> dict:
    """method -> seed -> (run with .aulc, {}, {}): seed s of a method returns mean + spread * (s - 4.5) + a small
    seed-specific wobble, so that a method equal in mean to PPO is level with it in the paired test."""
    wobble = {s: (-1) ** s * 3.0 * s for s in range(1, 9)}
    return {m: {s: (SimpleNamespace(aulc=mean + spread * (s - 4.5) + wobble[s] * (i + 1)), {}, {})
                for s in range(1, 9)} for i, (m, mean) in enumerate(means.items())}


@pytest.mark.parametrize("baseline_levels, baseline_means, eppo_mean_level, expected", [
    (("at", "above", "below"), (2000, 2600, 1500), "below", "1, in our EPPO: PFO, CB at or above the paper's level; "
                                                           "within EPPO, the evidential critic (EPPO_mean below too)"),
    (("at", "at", "below"), (2000, 2000, 1500), "at", "1, in our EPPO: PFO, CB at or above the paper's level; within "
                                                      "EPPO, the bonus (EPPO_mean at its level, EPPO_cor and EPPO_ind "
                                                      "below)"),
    (("below", "below", "at"), (1880, 1882, 1800), "below", "2, in the paper's PPO: PFO, CB below the paper's level "
                                                            "and level with our PPO"),
    (("below", "below", "below"), (1300, 1200, 1880), "below", "3, in the pipeline every method shares: PFO, CB below "
                                                               "the paper's level and apart from our PPO"),
    (("below", "below", "at"), (1880, 1200, 2600), "below", "4, mixed: no place is named; read method by method"),
])
def test_the_reading_names_the_first_pattern_that_holds(baseline_levels, baseline_means, eppo_mean_level, expected):
    """README's patterns, in its order, on hand-made levels and seeds (PPO at 1,880 on every reading)."""
    levels = {"PPO": (0.7, "at"), "EPPO_mean": (0.0, eppo_mean_level), "EPPO_cor": (0.0, "below"),
              "EPPO_ind": (0.0, "below"), **{m: (0.0, lv) for m, lv in zip(analyze.BASELINES, baseline_levels)}}
    means = {"PPO": 1880, **dict(zip(analyze.BASELINES, baseline_means)), "EPPO_mean": 1500, "EPPO_cor": 1500,
             "EPPO_ind": 1585}
    assert analyze.reading(levels, runs_with_aulc(means)) == expected


def test_the_papers_ordering_on_halfcheetah_is_the_paired_test_pair_by_pair():
    """README's HalfCheetah reading: each EPPO variant above PPO, PFO, CB and PPO_DRND by the one-sided paired test,
    those three level with PPO by its two-sided form; p against scipy's ttest_rel on the same seeds, and the
    verdicts where the hand-made means leave no doubt (EPPO_cor and EPPO_ind 1,000 above everything but each other,
    EPPO_mean and PFO equal in mean to PPO, CB 1,000 below it)."""
    means = {"PPO": 4000, "PFO": 4000, "CB": 3000, "PPO_DRND": 4100, "EPPO_mean": 4000, "EPPO_cor": 5000,
             "EPPO_ind": 5000}
    runs = runs_with_aulc(means)
    aulc = {m: [runs[m][s][0].aulc for s in range(1, 9)] for m in means}
    rows = analyze.ordering(runs)
    expected = [(f"{v} above {o}", "one-sided", stats.ttest_rel(aulc[v], aulc[o], alternative="greater").pvalue)
                for v in analyze.EPPO_VARIANTS for o in ("PPO", "PFO", "CB", "PPO_DRND")]
    expected += [(f"{b} level with PPO", "two-sided", stats.ttest_rel(aulc[b], aulc["PPO"]).pvalue)
                 for b in ("PFO", "CB", "PPO_DRND")]
    assert [(claim, test) for claim, test, _, _ in rows] == [(claim, test) for claim, test, _ in expected]
    for (claim, test, p, holds), (_, _, reference) in zip(rows, expected):
        assert p == pytest.approx(reference, rel=1e-9), claim
        assert holds == (p < 0.05 if test == "one-sided" else p >= 0.05), claim
    verdict = {claim: holds for claim, _, _, holds in rows}
    assert all(verdict[f"{v} above {o}"] for v in ("EPPO_cor", "EPPO_ind") for o in ("PPO", "PFO", "CB", "PPO_DRND"))
    assert not verdict["EPPO_mean above PPO"] and not verdict["EPPO_mean above PFO"] and verdict["EPPO_mean above CB"]
    assert verdict["PFO level with PPO"] and not verdict["CB level with PPO"]


@pytest.mark.parametrize("env, printed", [("HalfCheetah", True), ("Ant", False)])
def test_the_ordering_is_read_on_halfcheetah_once_every_method_has_its_8_seeds(tmp_path, capsys, env, printed):
    root = tmp_path / "outputs"
    for i, method in enumerate(analyze.METHODS):
        for seed in range(1, 9):
            run_dir = root / "paralysis" / env / "back-one" / method / f"seed{seed}"
            write_run(str(run_dir), method=method, env_id=f"{env}-v5", seed=seed, steps_per_task=100, num_tasks=2,
                      eval_frequency=50, returns=lambda step, task, i=i, seed=seed: 100.0 * i + seed * (1 + i / 10))
    assert analyze.main([f"paralysis/{env}/back-one", "--roots", str(root)]) == 0
    out = capsys.readouterr().out
    assert ("## The paper's ordering" in out) == printed
    if printed:  # every method's AULC rises with its column, on every seed: each EPPO variant above the 4 before it
        assert "| EPPO_mean above CB | one-sided | 0.000 | yes |" in out
        assert "| CB level with PPO | two-sided | 0.000 | no |" in out


def test_tables_of_hand_made_runs(tmp_path, capsys):
    """Seven methods on 3 seeds (interim), AULC = 100 x (column index) + seed: the last column is bold, every other
    is below it on every seed by the same margin plus nothing (paired p = 0): none underlined; the cost table reads
    summary.json."""
    root = tmp_path / "outputs"
    for i, method in enumerate(analyze.METHODS):
        for seed in (1, 2, 3):
            run_dir = root / "paralysis" / "Ant" / "back-one" / method / f"seed{seed}"
            write_run(str(run_dir), method=method, env_id="Ant-v5", seed=seed, steps_per_task=100, num_tasks=3,
                      eval_frequency=50, returns=lambda step, task, i=i, seed=seed: 100.0 * i + seed * (1 + i / 10))
            with open(run_dir / "summary.json", "w") as f:
                json.dump({"status": "finished", "group_train_sps": 1000.0 * (i + 1), "wall_time_s": 3600.0 * 3,
                           "num_seeds": 3}, f)
    assert analyze.main(["paralysis/Ant/back-one", "--roots", str(root), "--cost"]) == 0
    out = capsys.readouterr().out
    assert "**Interim**" in out and "The reading" not in out
    aulc_row = next(line for line in out.splitlines() if line.startswith("| AULC, ours"))
    cells = aulc_row.split(" | ")[1:]
    assert cells[-1].startswith("**") and not any("**" in c or "<u>" in c for c in cells[:-1])
    assert "| PFO | 3 | [3] | 2,000 | 1.00 |" in out


@pytest.mark.parametrize("setting, tables", [("paralysis/Ant/back-one", "ant_tables.md"),
                                             ("paralysis/HalfCheetah/back-one", "halfcheetah_tables.md")])
def test_the_committed_tables_are_what_the_readmes_command_prints(setting, tables, capsys):
    assert analyze.main([setting, "--cost"]) == 0
    with open(os.path.join(STUDY, tables)) as f:
        assert capsys.readouterr().out == f.read()


def test_one_sweep_over_seeds_1_to_8_runs_the_commands_of_the_two_phases_it_replaced():
    """launch.sh's one sweep (seeds 1-8, five per process) starts what its two phases did (seeds 1-5 five per
    process, then 6-8 three per process): the same commands, so no run changes when the study switched on
    2026-12-05. Read from launch.sh itself, so a change of its methods, settings or packing is caught."""
    from scripts import runlist

    with open(os.path.join(STUDY, "launch.sh")) as f:
        text = f.read()
    methods = text.split("export PAPER_LENGTH_METHODS=", 1)[1].split()[0].split(",")
    settings = runlist.select_settings(settings=text.split("\nBOTH=", 1)[1].split()[0])
    phase = text.split('export PAPER_LENGTH_PHASES="$BOTH ', 1)[1].split('"')[0].split()
    assert len(phase) == 2, "one phase of both settings expected"
    first, last = map(int, phase[0].split("-"))

    def commands(seeds, per_process):
        runs = runlist.build_runs(methods, settings, seeds, "/runs", seeds_per_process=per_process)
        return [run.argv for run in runs]

    one_sweep = commands(list(range(first, last + 1)), int(phase[1]))
    two_phases = commands([1, 2, 3, 4, 5], 5) + commands([6, 7, 8], 3)
    assert sorted(one_sweep) == sorted(two_phases) and len(one_sweep) == 2 * len(methods) * len(settings)


cb_spec = importlib.util.spec_from_file_location("cb_dormancy", os.path.join(STUDY, "cb_dormancy.py"))
cb_dormancy = importlib.util.module_from_spec(cb_spec)
cb_spec.loader.exec_module(cb_dormancy)


@pytest.mark.parametrize("cb_shift, ppo_shift, expected", [
    (10.0, 0.0, "L2 is the cause"),  # the probe far below CB in both networks and at PPO's level
    (10.0, -5.0, "L2 is a cause, not the only one (the probe still above PPO: critic, actor)"),
    (0.0, 0.0, "not L2"),
    (None, 0.0, "mixed: below CB in the critic only; read per network"),
])
def test_the_probes_reading_is_the_readmes_rule(cb_shift, ppo_shift, expected):
    """Hand-made averages: the probe's seeds at 8 ± noise, CB the probe plus cb_shift (the critic only when None),
    PPO the probe plus ppo_shift; the p-values are scipy's one-sided paired tests, as the rule says."""
    noise = [0.3, -0.2, 0.1, -0.4, 0.2]
    probe = {seed: 8.0 + n for seed, n in zip(cb_dormancy.SEEDS, noise)}
    dormant = {cb_dormancy.PROBE: {}, cb_dormancy.CB: {}, cb_dormancy.PPO: {}}
    for network in analyze.NETWORKS:
        shift = cb_shift if cb_shift is not None else (10.0 if network == "critic" else 0.0)
        dormant[cb_dormancy.PROBE][network] = dict(probe)
        dormant[cb_dormancy.CB][network] = {s: v + shift + 0.5 * noise[i] for i, (s, v) in enumerate(probe.items())}
        dormant[cb_dormancy.PPO][network] = {s: v + ppo_shift - 0.5 * noise[i]
                                             for i, (s, v) in enumerate(probe.items())}
    reading, p = cb_dormancy.probe_reading(dormant)
    assert reading == expected
    for network in analyze.NETWORKS:
        seeds = list(cb_dormancy.SEEDS)
        cb, pr, ppo = ([dormant[arm][network][s] for s in seeds] for arm in (cb_dormancy.CB, cb_dormancy.PROBE,
                                                                           cb_dormancy.PPO))
        assert p[network][0] == pytest.approx(stats.ttest_rel(cb, pr, alternative="greater").pvalue, rel=1e-12)
        assert p[network][1] == pytest.approx(stats.ttest_rel(pr, ppo, alternative="greater").pvalue, rel=1e-12)


def test_the_probe_reads_the_dormant_share_at_the_ends_of_tasks_0_to_3(tmp_path):
    """Only the rows of a task's last step count (not step 0, not task 4's end); a missing task end is an error."""
    rows = [(0, 0, 99.0), (1000, 0, 1.0), (2000, 1, 2.0), (3000, 2, 3.0), (4000, 3, 4.0), (5000, 4, 99.0)]
    with open(tmp_path / "plasticity.csv", "w") as f:
        f.write("global_step,task,network,effective_rank,stable_rank,dormant_percent\n")
        for step, task, value in rows:
            for network in analyze.NETWORKS:
                f.write(f"{step},{task},{network},1.0,1.0,{value if network == 'critic' else 10 * value}\n")
    assert cb_dormancy.dormant_at_task_ends(str(tmp_path), 1000) == {"critic": [1.0, 2.0, 3.0, 4.0],
                                                                     "actor": [10.0, 20.0, 30.0, 40.0]}
    with pytest.raises(ValueError, match="lacks task ends"):
        cb_dormancy.dormant_at_task_ends(str(tmp_path), 2000)


def test_the_committed_probe_reading_is_what_the_readmes_command_prints(capsys):
    assert cb_dormancy.main() == 0
    with open(os.path.join(STUDY, "cb_dormancy_probe.md")) as f:
        assert capsys.readouterr().out == f.read()


def _table_after(path: str, marker: str) -> dict:
    """row label -> {column: cell} of the first markdown table at or after the line ``marker`` in ``path`` (bold and
    underline marks dropped)."""
    with open(os.path.join(REPO_ROOT, path)) as f:
        lines = f.read().splitlines()
    start = next(i for i in range(lines.index(marker), len(lines)) if lines[i].startswith("|"))

    def cells(line):
        return [c.strip().replace("**", "").replace("<u>", "").replace("</u>", "") for c in line.strip("|").split("|")]

    columns = cells(lines[start])[1:]
    table = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table[cells(line)[0]] = dict(zip(columns, cells(line)[1:]))
    return table


def _committed_aulc(tables: str) -> dict:
    """method -> (ours 'mean ± se', seeds, the paper's 'mean ± se', level) from a committed table's AULC rows."""
    rows = _table_after(os.path.join(STUDY, tables), "## AULC and Final Return")
    return {m: (ours, int(rows["seeds"][m]), rows["AULC, the paper (15 seeds)"][m], rows["level"][m])
            for m, ours in rows["AULC, ours"].items()}


@pytest.mark.parametrize("setting, tables", [("Ant", "ant_tables.md"), ("HalfCheetah", "halfcheetah_tables.md")])
def test_what_users_read_of_each_baseline_is_the_committed_tables(setting, tables):
    """The README's and reproduction.md's seven-column rows are copied by hand: each cell must be the committed
    table's (ours, the paper's; every method at its 8 seeds, the study being done)."""
    committed = _committed_aulc(tables)
    assert sorted(committed) == sorted(analyze.METHODS) and all(seeds == 8 for _, seeds, _, _ in committed.values())
    readme = _table_after("README.md", "| setting | PPO | PFO | CB | PPO_DRND | EPPO_mean | EPPO_cor | EPPO_ind |")
    reproduction = _table_after(os.path.join("docs", "reproduction.md"),
                                "| AULC, ours / the paper | PPO | PFO | CB | PPO_DRND | EPPO_mean | EPPO_cor "
                                "| EPPO_ind |")
    for method in analyze.METHODS:
        readme_cell = readme[f"{setting}-v5"][method]
        reproduction_cell = reproduction[f"{setting} `back-one`"][method]
        ours, _, paper, _ = committed[method]
        assert readme_cell == f"{ours.split(' ± ')[0]} / {paper.split(' ± ')[0]}", (method, readme_cell)
        assert reproduction_cell == f"{ours} (8) / {paper}", (method, reproduction_cell)


@pytest.mark.parametrize("section, tables, verdict", [
    ("## The result on Ant: pattern 2, in the paper's PPO", "ant_tables.md", "\n2, in the paper's PPO:"),
    ("## The result on HalfCheetah: the paper's ordering holds for the two bonuses, not for the critic alone",
     "halfcheetah_tables.md", "The paper's ordering holds in 10 of its 15 pairs"),
])
def test_the_studys_results_are_the_committed_tables(section, tables, verdict):
    """Each result section's table is copied by hand: ours, the paper's and the level per method, and on
    HalfCheetah the one-sided p against our PPO from the tables' ordering; the verdict the section states is the one
    the tables print."""
    committed = _committed_aulc(tables)
    result = _table_after(os.path.join(STUDY, "README.md"), section)
    for method, (ours, _, paper, level) in committed.items():
        assert result["ours"][method] == ours and result["the paper (15 seeds)"][method] == paper
        assert result["level (Welch p)"][method].split(" (")[0] == level
    with open(os.path.join(STUDY, tables)) as f:
        text = f.read()
    assert verdict in text
    if "halfcheetah" in tables:
        ordering = _table_after(os.path.join(STUDY, tables), "## The paper's ordering (README.md's reading of "
                                                             "HalfCheetah, written before the results)")
        for method in ("EPPO_mean", "EPPO_cor", "EPPO_ind"):
            assert result["against our PPO, paired one-sided p (above)"][method] == ordering[f"{method} above PPO"]["p"]


def test_the_studys_cost_table_is_the_committed_tables():
    """The Cost section's table is copied by hand from the tables' --cost rows: each cell 'core-hours (steps/s)'."""
    readme = _table_after(os.path.join(STUDY, "README.md"),
                          "| core-hours per seed (training steps/s per process) | PPO | PFO | CB | PPO_DRND "
                          "| EPPO_mean | EPPO_cor | EPPO_ind |")
    for setting, tables in (("Ant", "ant_tables.md"), ("HalfCheetah", "halfcheetah_tables.md")):
        cost = _table_after(os.path.join(STUDY, tables), "## Cost (summary.json)")
        for method in analyze.METHODS:
            expected = f"{cost[method]['core-hours per seed']} ({cost[method]['steps/s per process (training)']})"
            assert readme[f"{setting} `back-one`"][method] == expected, (setting, method)
