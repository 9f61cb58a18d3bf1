"""Summarize a sweep as the paper's result tables (Tables 1 and 3): AULC and Final Return.

    python scripts/summarize.py runs/sweep                   # Markdown
    python scripts/summarize.py runs/sweep --paper           # the paper's numbers beside ours
    python scripts/summarize.py runs/sweep --format latex    # or csv
    python scripts/summarize.py runs/grid --select-kappa     # kappa grid search -> paper_kappa.csv format
    python scripts/summarize.py runs/sweep --robust --threshold 2000   # + IQM, bootstrap intervals, every seed
    python scripts/summarize.py runs/sweep --p-values        # each cell's t-test p-value against the best
    python scripts/summarize.py runs/sweep --split-by-config # runs whose flags differ: one column per configuration

Reads every run directory under ROOT (evaluations.csv, config.json, summary.json). Per run (paper §4):
- AULC: mean of the evaluation return (return_mean, itself the mean over the evaluation episodes)
  over every evaluation point of the run, step 0 included;
- Final Return: mean over tasks of the evaluation at each task's last step,
  the row with global_step == (task + 1) * steps_per_task (evaluated on that task).
Per cell (setting x method): mean and standard error over seeds (std with ddof=1 / sqrt(n)).
Bold: the highest mean. Underlined: methods not significantly worse than it, by the one-sided paired
t-test over seeds of Appendix "Statistical significance": scipy.stats.ttest_rel(best, other,
alternative="greater"); not significantly worse when p >= 0.05.
Average score: mean of the cell means over the settings; average ranking: mean over the settings of
each method's rank by cell mean (1 = highest; ties share the average rank). Both use only the
settings in which every method of the table has results, so that methods are compared on the same
settings, and appear only with more than one such setting (the average of one setting repeats it; likewise an
environment's Average row). Below 5 seeds per cell (FEW_SEEDS) a note under the table says that its t-tests,
and --robust's bootstrap intervals, mean little there. Runs that did not finish (no summary.json), lack evaluation
rows or have no usable config.json are listed separately and never averaged. The runs of one cell must agree in
every key of config.json but the bookkeeping ones (BOOKKEEPING_KEYS: seed, run directory, threads, device,
tracking, ...): otherwise the tool stops (exit 2) with one line per group of runs that agree, or with
--split-by-config shows each group as its own column. Output: Markdown into a file or a pipe, plain text (no
Markdown or HTML) on a terminal, or --format markdown|text|csv|latex.

Robust statistics (--robust, Markdown, text and CSV; docs/statistics.md): the paper's tables stay as they are,
and the aggregate statistics that Agarwal et al. 2021 ("Deep RL at the edge of the statistical precipice")
recommend for few, skewed or bimodal seeds follow them, computed as their rliable package computes them:
- per cell, the interquartile mean (IQM: the mean after cutting floor(n/4) seeds at each end, i.e.
  scipy.stats.trim_mean(x, 0.25); the plain mean for n < 4) with the 95% percentile interval of a
  bootstrap over seeds (--bootstrap-reps, default 2000; --bootstrap-seed, default 0: the same numbers on
  every run);
- per method, the aggregate IQM of all its runs over the settings where every method has results, with a
  stratified bootstrap interval (each setting's runs resampled within that setting); raw returns, or with
  --normalize minmax each setting rescaled to [0, 1] by the lowest and highest run of any method shown;
- every seed's value, and with --threshold T how many seeds per cell are above T: a mean hides seeds that
  split into a high and a low mode.
In CSV the cell rows gain the columns iqm, iqm_ci_low, iqm_ci_high, normalize, threshold, n_above and
seed_values ("seed:value;..."), and rows with row=aggregate_iqm (env=all, n = runs pooled) follow.
Performance profiles are drawn by scripts/plot_curves.py (performance_profile below).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import warnings
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from scipy import stats

if __package__:  # imported as scripts.summarize
    from . import runlist
else:  # run as python scripts/summarize.py
    import runlist

METRICS = ("aulc", "final_return")
METRIC_LABELS = {"aulc": "AULC", "final_return": "Final Return"}
SIGNIFICANCE_LEVEL = 0.05
# Below this many seeds per cell the tables say that their t-tests (and --robust's intervals) mean little there:
# the paper's claims rest on 15 seeds, and a research claim here on at least 5 (docs/statistics.md).
FEW_SEEDS = 5
PAPER_RESULTS_CSV = os.path.join(runlist.SCRIPTS_DIR, "paper_results.csv")
ENV_ORDER = list(runlist.ENV_IDS)
RUN_DIR_MARKERS = ("evaluations.csv", "config.json", "summary.json", "stdout.log")

# The keys of config.json that may differ between the runs of one cell (setting x method), each with why: every
# other key must be equal in them all (config_conflicts below), i.e. every Args field a script records under "args"
# (its flags, defaults included) and config.json's own entries (script, method, num_tasks, total_steps, schedule).
# A key one run records and another lacks is a difference (a run from before the flag existed), and a default
# that changed shows as the value each run recorded. These say which seed a run is, where it writes, how fast or
# on what it computed, where it logged, or what code and libraries wrote it: none changes what a finished run's
# evaluations measure.
BOOKKEEPING_KEYS = {
    # Args fields
    "seed": "the runs of a cell are its seeds (the t-tests pair cells by seed)",
    "num_seeds": "how many seeds one process trains side by side; a seed's results do not depend on the seeds "
                 "beside it (docs/batched-seeds.md)",
    "run_dir": "where the run writes",
    "exp_name": "a name in the default run directory and the run name",
    "torch_threads": "threads of torch on the CPU: speed",
    "env_threads": "threads that step the simulations: speed; the results do not depend on it",
    "cuda": "the device",
    "torch_deterministic": "deterministic kernels on the device: reruns bit for bit, not another computation",
    "track": "Weights & Biases logging on or off",
    "wandb_project_name": "where Weights & Biases logs",
    "wandb_entity": "where Weights & Biases logs",
    "overwrite": "what to do with an earlier run's outputs in run_dir",
    # a flag of v0.1-v0.4 (how checkpoints were unpickled), no longer written: a run from before pools with one after
    "trust_checkpoint": "how checkpoints are unpickled",
    "checkpoint_frequency": "how often checkpoint.pt is written; a resumed run continues bit for bit",
    "max_nonfinite_skips": "when to stop after non-finite steps; a finished run never reached it",
    "save_states": "whether states.npz (the visited observations) is written beside the run",
    "save_states_every": "which observations states.npz keeps",
    # config.json's own entries
    "run_name": "made of exp_name and seed",
    "git_commit": "the commit that ran: a flag or a default that changed between two commits shows in the flags",
    "python": "library version: requirements.txt pins it",
    "torch": "library version: requirements.txt pins it (the CPU and the CUDA build of one version differ here)",
    "release": "the generation of defaults the code had (CHANGELOG.md): the flags above record every default's value",
    "device": "where the run computed (cpu, or cuda:N)",
    "gymnasium": "library version: requirements.txt pins it",
    "mujoco": "library version: requirements.txt pins it",
    "numpy": "library version: requirements.txt pins it",
}


@dataclass(frozen=True)
class Evaluation:
    global_step: int
    task: int
    return_mean: float


@dataclass
class RunRecord:
    """One run directory: its identity, its evaluations and the two metrics (None when incomplete)."""

    run_dir: str
    setting: runlist.Setting | None = None
    method: str | None = None
    seed: int | None = None
    kappa: float | None = None
    steps_per_task: int | None = None
    num_tasks: int | None = None
    eval_frequency: int | None = None
    evaluations: list[Evaluation] = field(default_factory=list)
    aulc: float | None = None
    final_return: float | None = None
    config: dict | None = None  # config.json's keys that must agree within a cell (config_values)
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems


# ---------------------------------------------------------------- per-run metrics


def expected_evaluations(steps_per_task: int, num_tasks: int, eval_frequency: int) -> list[tuple[int, int]]:
    """(global_step, task evaluated) of every evaluation the CONTRACT prescribes: step 0, every
    eval_frequency steps, and the last step of every task; a step evaluates the task it ended."""
    total = steps_per_task * num_tasks
    steps = {0, *range(eval_frequency, total + 1, eval_frequency),
             *(steps_per_task * (i + 1) for i in range(num_tasks))}
    return [(step, max(step - 1, 0) // steps_per_task) for step in sorted(steps)]


def aulc(evaluations: list[Evaluation]) -> float:
    """Area under the learning curve: the mean evaluation return over every evaluation point (step 0 included)."""
    if not evaluations:
        raise ValueError("AULC of a run without evaluations")
    return float(np.mean([e.return_mean for e in evaluations]))


def task_end_returns(evaluations: list[Evaluation], steps_per_task: int, num_tasks: int) -> list[float]:
    """Evaluation return at the last step of each task ((i + 1) * steps_per_task, task i)."""
    by_key = {(e.global_step, e.task): e.return_mean for e in evaluations}
    missing = [i for i in range(num_tasks) if ((i + 1) * steps_per_task, i) not in by_key]
    if missing:
        raise ValueError(f"no evaluation at the end of task(s) {missing}")
    return [by_key[((i + 1) * steps_per_task, i)] for i in range(num_tasks)]


def final_return(evaluations: list[Evaluation], steps_per_task: int, num_tasks: int) -> float:
    """Final Return: the mean over tasks of the evaluation at each task's last step."""
    return float(np.mean(task_end_returns(evaluations, steps_per_task, num_tasks)))


def evaluation_problems(evaluations: list[Evaluation], steps_per_task: int, num_tasks: int,
                        eval_frequency: int) -> list[str]:
    """Differences between the logged and the prescribed evaluations (empty list = complete)."""
    expected = expected_evaluations(steps_per_task, num_tasks, eval_frequency)
    logged = [(e.global_step, e.task) for e in evaluations]
    problems = []
    if len(set(logged)) != len(logged):
        problems.append("duplicate evaluation rows")
    missing = sorted(set(expected) - set(logged))
    if missing:
        shown = ", ".join(str(step) for step, _ in missing[:5]) + (", ..." if len(missing) > 5 else "")
        problems.append(f"{len(missing)} of {len(expected)} evaluation rows missing (steps {shown})")
    unexpected = sorted(set(logged) - set(expected))
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected evaluation rows "
                        f"(first: step {unexpected[0][0]}, task {unexpected[0][1]})")
    nonfinite = [e.global_step for e in evaluations if not math.isfinite(e.return_mean)]
    if nonfinite:
        problems.append(f"non-finite return_mean at step(s) {nonfinite[:5]}")
    return problems


# ---------------------------------------------------------------- reading runs


def read_evaluations(path: str) -> list[Evaluation]:
    with open(path, newline="") as f:
        return [Evaluation(int(row["global_step"]), int(row["task"]), float(row["return_mean"]))
                for row in csv.DictReader(f)]


def identity_from_path(run_dir: str) -> tuple[runlist.Setting, str, int] | None:
    """.../<experiment>/<env>/<strategy>/<method>/seed<k> -> (Setting, method, seed); None if not that layout."""
    parts = os.path.normpath(run_dir).split(os.sep)
    if len(parts) < 5 or not parts[-1].startswith("seed") or not parts[-1][4:].isdigit():
        return None
    experiment, env, strategy, method = parts[-5:-1]
    if env not in runlist.ENV_IDS:
        return None
    return runlist.Setting(experiment, env, strategy), method, int(parts[-1][4:])


def kappa_from_path(run_dir: str) -> float | None:
    """<root>/kappa<K>/<experiment>/... (grid-search layout) -> K."""
    parts = os.path.normpath(run_dir).split(os.sep)
    if len(parts) >= 6 and parts[-6].startswith("kappa"):
        try:
            return float(parts[-6][5:])
        except ValueError:
            return None
    return None


def read_config(path: str) -> tuple[dict | None, str | None]:
    """(config.json as a dict, None), or (None, why it cannot be used): unreadable, not JSON, not an object, or
    its "args" not an object."""
    try:
        with open(path, "rb") as f:
            config = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as error:  # ValueError: JSONDecodeError, UnicodeDecodeError
        return None, f"unreadable config.json ({error})"
    if not isinstance(config, dict):
        return None, f"malformed config.json (a JSON {type(config).__name__}, not an object)"
    if not isinstance(config.get("args", {}), dict):
        return None, "malformed config.json (its args is not an object)"
    return config, None


def config_values(config: dict) -> dict:
    """The keys of a run's config.json that the runs of one cell must agree in: every Args field ("args") and
    every entry of config.json itself, less BOOKKEEPING_KEYS. config.json's own num_tasks replaces the flag of
    that name: it is the flag resolved (--num-tasks 0 = the whole schedule)."""
    values = {**config.get("args", config), **{k: v for k, v in config.items() if k != "args"}}
    return {k: v for k, v in values.items() if k not in BOOKKEEPING_KEYS}


def load_run(run_dir: str) -> RunRecord:
    """Identity from config.json (else the path layout), metrics from evaluations.csv."""
    record = RunRecord(run_dir)
    config_path = os.path.join(run_dir, "config.json")
    config = None
    if os.path.exists(config_path):
        config, problem = read_config(config_path)
        if problem:
            record.problems.append(problem)
    else:
        record.problems.append("no config.json (its flags cannot be checked)")
    path_identity = identity_from_path(run_dir)
    if config is not None:
        args = config.get("args", config)
        try:
            record.setting = runlist.Setting(args["experiment"], runlist.env_name(args["env_id"]), args["strategy"])
            record.seed = int(args["seed"])
            record.steps_per_task = int(args["steps_per_task"])
            record.eval_frequency = int(args["eval_frequency"])
            num_tasks = config.get("num_tasks") or args.get("num_tasks") or None
            record.num_tasks = None if num_tasks is None else int(num_tasks)
        except (KeyError, TypeError, ValueError) as error:
            record.problems.append(f"config.json lacks a valid {error}")
        if any(value is not None and value < 1
               for value in (record.steps_per_task, record.eval_frequency, record.num_tasks)):
            record.problems.append("config.json: steps_per_task, eval_frequency and num_tasks must be positive")
            record.steps_per_task = record.eval_frequency = record.num_tasks = None
        script, method, kappa = config.get("script", ""), config.get("method"), args.get("kappa")
        if (not isinstance(script, str) or not isinstance(method, (str, type(None)))
                or not isinstance(args.get("variant"), (str, type(None)))):
            record.problems.append("malformed config.json (script, method or variant not a string)")
        else:
            record.method = method or runlist.method_for_script(script, args.get("variant"))
        if isinstance(kappa, (int, float)) and not isinstance(kappa, bool) or kappa is None:
            record.kappa = kappa
        else:
            record.problems.append(f"malformed config.json (kappa {kappa!r} is not a number)")
        record.config = config_values(config)
    elif path_identity is not None:
        record.setting, record.method, record.seed = path_identity
    if record.method is None and path_identity is not None:
        record.method = path_identity[1]
    if record.kappa is None:
        record.kappa = kappa_from_path(run_dir)
    if record.setting is None or record.method is None or record.seed is None:
        record.problems.append("cannot tell setting/method/seed "
                               "(no config.json and not <experiment>/<env>/<strategy>/<method>/seed<k>)")

    summary_path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(summary_path):
        record.problems.append("not finished (no summary.json)")
    evaluations_path = os.path.join(run_dir, "evaluations.csv")
    if not os.path.isfile(evaluations_path):
        record.problems.append("no evaluations.csv")
        return record
    try:
        record.evaluations = read_evaluations(evaluations_path)
    except (OSError, KeyError, ValueError) as error:
        record.problems.append(f"unreadable evaluations.csv ({error})")
        return record
    if not record.evaluations:
        record.problems.append("evaluations.csv has no rows")
        return record
    if record.steps_per_task is None or record.eval_frequency is None or record.num_tasks is None:
        if config is not None and not any(p.startswith("config.json") for p in record.problems):  # else said above
            record.problems.append("no steps_per_task/num_tasks/eval_frequency (config.json): "
                                   "cannot check rows or compute Final Return")
        return record
    record.problems.extend(evaluation_problems(record.evaluations, record.steps_per_task, record.num_tasks,
                                               record.eval_frequency))
    if record.complete:
        record.aulc = aulc(record.evaluations)
        record.final_return = final_return(record.evaluations, record.steps_per_task, record.num_tasks)
    return record


def find_run_dirs(root: str) -> list[str]:
    """Every directory under root holding a run's file (evaluations.csv, config.json, summary.json or a sweep log)."""
    found = []
    for directory, _, files in os.walk(root):
        if any(marker in files for marker in RUN_DIR_MARKERS):
            found.append(directory)
    return sorted(found)


def load_runs(root: str) -> list[RunRecord]:
    return [load_run(directory) for directory in find_run_dirs(root)]


def method_order(methods) -> list[str]:
    """The paper's column order first, then other labels alphabetically; a label that --split-by-config made
    ('PPO [learning_rate=0.001]') goes where its method goes."""
    return sorted(set(methods), key=lambda m: _position(m.split(" [", 1)[0], list(runlist.METHODS)) + (m,))


def _position(item, order) -> tuple[int, str]:
    return (order.index(item) if item in order else len(order), str(item))


def experiment_order(experiments) -> list[str]:
    return sorted(set(experiments), key=lambda e: _position(e, runlist.EXPERIMENTS))


def setting_order(settings) -> list[runlist.Setting]:
    """The paper's order: experiment, env, strategy (unknown names last, alphabetically)."""
    strategies = [s.strategy for s in runlist.paper_settings()]  # the paper's table order (Tables 1 and 3)
    key = lambda s: (_position(s.experiment, runlist.EXPERIMENTS), _position(s.env, ENV_ORDER),  # noqa: E731
                     _position(s.strategy, strategies))
    return sorted(set(settings), key=key)


def _cell_labels(runs: list[RunRecord]) -> dict[int, str]:
    """id(run) -> its column label, for the complete runs: the method, with ' (kappa=K)' added when one setting
    holds several kappas of a method."""
    kappas: dict[tuple[runlist.Setting, str], set] = {}
    for run in runs:
        if run.complete:
            kappas.setdefault((run.setting, run.method), set()).add(run.kappa)
    return {id(run): f"{run.method} (kappa={run.kappa})" if len(kappas[(run.setting, run.method)]) > 1 else run.method
            for run in runs if run.complete}  # fmt: skip


@dataclass
class ConfigGroup:
    """The runs of one cell that agree in every key config.json records but BOOKKEEPING_KEYS."""

    runs: list[RunRecord]
    shown: dict[str, str]  # the keys in which the cell's groups differ -> this group's value, as text

    def suffix(self) -> str:
        return ", ".join(f"{key}={value}" for key, value in self.shown.items())


@dataclass
class ConfigConflict:
    """A cell whose complete runs do not agree: two groups or more."""

    setting: runlist.Setting
    label: str
    groups: list[ConfigGroup]

    def lines(self) -> list[str]:
        return [f"{self.setting} {self.label}: {group.suffix()}: {', '.join(run.run_dir for run in group.runs)}"
                for group in self.groups]


ABSENT = "(absent)"  # how a key that a run's config.json lacks is shown


def _comparable(value) -> str:
    """A value of config.json as a key for equality: 1 and 1.0 are equal, True and 1 are not, NaN equals NaN."""
    def normal(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [normal(x) for x in v]
        if isinstance(v, dict):
            return {str(k): normal(x) for k, x in v.items()}
        return v

    return json.dumps(normal(value), sort_keys=True)


def _show_value(config: dict, key: str) -> str:
    if key not in config:
        return ABSENT
    value = config[key]
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)  # True, 0.001, None, 1024


def config_conflicts(runs: list[RunRecord]) -> list[ConfigConflict]:
    """The cells (setting x column label) whose complete runs differ in a key of config.json that is not in
    BOOKKEEPING_KEYS, each with its groups of runs that agree (in the order of their first run directory) and
    the differing keys' values; [] when every cell's runs agree. Cells in table order."""
    labels = _cell_labels(runs)
    cells: dict[tuple[runlist.Setting, str], list[RunRecord]] = {}
    for run in sorted((r for r in runs if r.complete), key=lambda r: r.run_dir):
        cells.setdefault((run.setting, labels[id(run)]), []).append(run)
    conflicts = []
    for (setting, label), cell_runs in cells.items():
        configs = [run.config or {} for run in cell_runs]
        keys = sorted({key for config in configs for key in config})
        signature = lambda config: tuple(_comparable(config[k]) if k in config else ABSENT for k in keys)  # noqa: E731
        groups: dict[tuple, list[int]] = {}
        for i, config in enumerate(configs):
            groups.setdefault(signature(config), []).append(i)
        if len(groups) < 2:
            continue
        differing = [k for j, k in enumerate(keys) if len({sig[j] for sig in groups}) > 1]
        conflicts.append(ConfigConflict(setting, label, [
            ConfigGroup([cell_runs[i] for i in members], {k: _show_value(configs[members[0]], k) for k in differing})
            for members in groups.values()
        ]))  # fmt: skip
    order = {s: i for i, s in enumerate(setting_order(c.setting for c in conflicts))}
    methods = method_order(c.label for c in conflicts)
    return sorted(conflicts, key=lambda c: (order[c.setting], methods.index(c.label)))


def group_runs(runs: list[RunRecord], split_by_config: bool = False
               ) -> tuple[dict[tuple[runlist.Setting, str], dict[int, RunRecord]], list[RunRecord]]:  # fmt: skip
    """Complete runs -> {(setting, label): {seed: run}}, plus the runs left out (incomplete or duplicate seed).
    The label is the method, with ' (kappa=K)' added when one setting holds several kappas of a method. Runs of
    one cell that differ in their flags are pooled (main refuses them: config_conflicts) unless `split_by_config`:
    then each group of runs that agree is its own cell, its label followed by the keys and values in which it
    differs from the cell's other groups: 'PPO [learning_rate=0.001, norm_reward=False]'."""
    labels = _cell_labels(runs)
    if split_by_config:
        for conflict in config_conflicts(runs):
            for group in conflict.groups:
                labels.update({id(run): f"{conflict.label} [{group.suffix()}]" for run in group.runs})
    groups: dict[tuple[runlist.Setting, str], dict[int, RunRecord]] = {}
    left_out = [run for run in runs if not run.complete]
    for run in runs:
        if not run.complete:
            continue
        cell = groups.setdefault((run.setting, labels[id(run)]), {})
        if run.seed in cell:
            run.problems.append(f"same setting, method and seed as {cell[run.seed].run_dir}")
            left_out.append(run)
        else:
            cell[run.seed] = run
    return groups, left_out


# ---------------------------------------------------------------- statistics


def mean_se(values) -> tuple[float, float]:
    """Mean and standard error (sample std with ddof=1 over sqrt(n)); se is nan for a single value."""
    values = np.asarray(list(values), dtype=float)
    if values.size == 0:
        raise ValueError("mean of no values")
    se = float(np.std(values, ddof=1) / np.sqrt(values.size)) if values.size > 1 else math.nan
    return float(np.mean(values)), se


def paired_pvalue(best: dict[int, float], other: dict[int, float]) -> tuple[float, int]:
    """One-sided paired t-test over the seeds both have: H1 'best is better than other'.
    Returns (p, number of pairs); p is nan with fewer than 2 pairs, and 1.0 when every pair is equal."""
    seeds = sorted(set(best) & set(other))
    if len(seeds) < 2:
        return math.nan, len(seeds)
    a = np.array([best[s] for s in seeds])
    b = np.array([other[s] for s in seeds])
    if np.all(a == b):
        return 1.0, len(seeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant nonzero differences: t = +-inf is the right limit
        p = stats.ttest_rel(a, b, alternative="greater").pvalue
    return float(p), len(seeds)


@dataclass
class Cell:
    values: dict[int, float]  # seed -> metric
    mean: float = math.nan
    se: float = math.nan
    best: bool = False
    p_value: float | None = None  # vs the best (None for the best itself)
    n_pairs: int = 0
    not_worse: bool = False  # underlined: p >= SIGNIFICANCE_LEVEL

    def __post_init__(self):
        self.mean, self.se = mean_se(self.values.values())

    @property
    def n(self) -> int:
        return len(self.values)


def mark_significance(cells: dict[str, Cell], alpha: float = SIGNIFICANCE_LEVEL) -> str:
    """Mark the best cell (highest mean; first in method order on ties) and, for the others, whether
    they are not significantly worse. Returns the best label."""
    labels = method_order(cells)
    best = max(labels, key=lambda m: (cells[m].mean, -labels.index(m)))
    for label in labels:
        cell = cells[label]
        cell.best = label == best
        if cell.best:
            continue
        cell.p_value, cell.n_pairs = paired_pvalue(cells[best].values, cell.values)
        cell.not_worse = not math.isnan(cell.p_value) and cell.p_value >= alpha
    return best


def ranks(means: dict[str, float]) -> dict[str, float]:
    """Rank 1 = highest mean; tied means share the average of their ranks."""
    labels = list(means)
    values = stats.rankdata([-means[m] for m in labels], method="average")
    return {m: float(r) for m, r in zip(labels, values)}


def average_scores(means_by_setting: dict, settings: list) -> dict[str, float]:
    methods = means_by_setting[settings[0]].keys()
    return {m: float(np.mean([means_by_setting[s][m] for s in settings])) for m in methods}


def average_ranks(means_by_setting: dict, settings: list) -> dict[str, float]:
    per_setting = [ranks(means_by_setting[s]) for s in settings]
    return {m: float(np.mean([r[m] for r in per_setting])) for m in per_setting[0]}


def read_paper_results(path: str = PAPER_RESULTS_CSV) -> dict[tuple[str, runlist.Setting, str], tuple[float, float]]:
    """(metric, setting, method) -> (mean, se) from scripts/paper_results.csv."""
    table = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            setting = runlist.Setting(row["experiment"], row["env"], row["strategy"])
            table[(row["metric"], setting, row["model"])] = (float(row["mean"]), float(row["se"]))
    return table


# ---------------------------------------------------------------- robust statistics (--robust)
# The aggregate statistics of Agarwal et al. 2021, "Deep RL at the edge of the statistical precipice" (NeurIPS),
# computed as its `rliable` package computes them, but with numpy: rliable 1.2.0 (its latest release) requires
# arch < 8, and pip resolves that next to our numpy 2.4.6 / scipy 1.17.1 to arch 7.2.0 + pandas 3.1.1, which
# fails at import (arch calls pandas' deprecate_kwarg with its pre-3.0 signature); it imports only with pandas,
# statsmodels, seaborn and arch pinned back (~160 MB of dependencies for three estimators), and it draws its
# resamples from numpy's global random state. The estimators below are rliable's definitions (IQM =
# scipy.stats.trim_mean(x, 0.25); percentile intervals of a stratified bootstrap; run-score distributions),
# each a few lines, tested against scipy, closed forms and exact enumerations (tests/tools/test_summarize.py).

BOOTSTRAP_REPS = 2000  # rliable's default number of resamples
CONFIDENCE = 0.95
NORMALIZATIONS = ("none", "minmax")


def iqm(values, axis: int = -1):
    """Interquartile mean along `axis`: the mean of what remains after cutting the floor(n/4) lowest and the
    floor(n/4) highest values (scipy.stats.trim_mean(x, 0.25), rliable's metrics.aggregate_iqm): the middle
    half exactly when 4 divides n, the plain mean when n < 4. A float for 1-D input, else an array."""
    values = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = values.shape[axis]
    if n == 0:
        raise ValueError("IQM of no values")
    cut = n // 4
    result = np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)
    return float(result) if np.ndim(result) == 0 else result


def stratified_resamples(strata, reps: int, rng: np.random.Generator) -> np.ndarray:
    """`reps` stratified bootstrap resamples of the pooled runs, shape (reps, total number of runs): each
    stratum (one setting's runs) is drawn with replacement to its own size, independently of the others, so
    that every resample holds as many runs of each setting as the data (rliable's StratifiedBootstrap)."""
    parts = []
    for stratum in strata:
        stratum = np.asarray(stratum, dtype=float).ravel()
        if stratum.size == 0:
            raise ValueError("empty stratum")
        parts.append(stratum[rng.integers(0, stratum.size, size=(reps, stratum.size))])
    if not parts:
        raise ValueError("no strata")
    return np.concatenate(parts, axis=1)


def _percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = 50 * (1 - confidence)
    low, high = np.percentile(replicates, [tail, 100 - tail], axis=0)
    return low, high


def bootstrap_interval(strata, statistic=iqm, reps: int = BOOTSTRAP_REPS, seed: int = 0,
                       confidence: float = CONFIDENCE) -> tuple[float, float, float]:  # fmt: skip
    """(point estimate, low, high): `statistic` of all runs pooled, and the percentile interval of `statistic`
    over `reps` stratified bootstrap resamples (rliable's get_interval_estimates, method 'percentile'). A fixed
    `seed` gives the same interval every time. `statistic` reduces the last axis (iqm, or e.g.
    lambda x: np.mean(x, axis=-1))."""
    pooled = np.concatenate([np.asarray(s, dtype=float).ravel() for s in strata])
    replicates = statistic(stratified_resamples(strata, reps, np.random.default_rng(seed)))
    low, high = _percentile_interval(np.asarray(replicates), confidence)
    return float(statistic(pooled)), float(low), float(high)


def performance_profile(strata, taus, reps: int = BOOTSTRAP_REPS, seed: int = 0,
                        confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Run-score distribution (rliable's create_performance_profile): at each tau, the fraction of all runs
    with a score > tau, and its percentile interval over `reps` stratified bootstrap resamples.
    Returns (fractions, low, high), each of len(taus)."""
    taus = np.asarray(taus, dtype=float)
    pooled = np.concatenate([np.asarray(s, dtype=float).ravel() for s in strata])
    resamples = stratified_resamples(strata, reps, np.random.default_rng(seed))
    replicates = np.stack([(resamples > tau).mean(axis=1) for tau in taus], axis=1)  # (reps, len(taus))
    low, high = _percentile_interval(replicates, confidence)
    return (pooled[:, None] > taus).mean(axis=0), low, high


def minmax_normalize(values_by_method: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
    """One setting's runs rescaled to [0, 1]: (x - min) / (max - min) over every run of every method given
    (0 = the worst run, 1 = the best); all 0.5 when every run has the same score."""
    everything = [v for per_seed in values_by_method.values() for v in per_seed.values()]
    low, high = min(everything), max(everything)
    scale = lambda v: 0.5 if high == low else (v - low) / (high - low)  # noqa: E731
    return {m: {seed: scale(v) for seed, v in per_seed.items()} for m, per_seed in values_by_method.items()}


@dataclass
class RobustCell:
    values: dict[int, float]  # seed -> metric
    iqm: float
    low: float
    high: float
    n_above: int | None = None  # seeds with a value > the threshold (None without a threshold)

    @property
    def n(self) -> int:
        return len(self.values)


@dataclass
class RobustAggregate:
    iqm: float
    low: float
    high: float
    n_runs: int


@dataclass
class RobustSummary:
    """The robust statistics of one metric of one experiment."""

    metric: str
    settings: list[runlist.Setting]
    methods: list[str]
    cells: dict[tuple[runlist.Setting, str], RobustCell]
    comparable: list[runlist.Setting]  # the settings the aggregate pools (every method has results)
    aggregate: dict[str, RobustAggregate]
    normalize: str = "none"


@dataclass
class RobustOptions:
    reps: int = BOOTSTRAP_REPS
    seed: int = 0
    threshold: float | None = None
    normalize: str = "none"


def robust_summary(groups: dict, metric: str, experiment: str, options: RobustOptions) -> RobustSummary:
    """Per cell: IQM of the seeds with its bootstrap interval (and the seeds above options.threshold); per
    method: the IQM of all its runs in the comparable settings, resampled within each setting."""
    keys = [k for k in groups if k[0].experiment == experiment]
    settings = setting_order(s for s, _ in keys)
    methods = method_order(m for _, m in keys)
    values = {k: {seed: getattr(run, metric) for seed, run in groups[k].items()} for k in keys}
    cells = {}
    for key, per_seed in values.items():
        point, low, high = bootstrap_interval([list(per_seed.values())], reps=options.reps, seed=options.seed)
        above = None if options.threshold is None else sum(v > options.threshold for v in per_seed.values())
        cells[key] = RobustCell(per_seed, point, low, high, above)
    comparable = [s for s in settings if all((s, m) in values for m in methods)]
    aggregate = {}
    if comparable:
        by_setting = {s: {m: values[(s, m)] for m in methods} for s in comparable}
        if options.normalize == "minmax":
            by_setting = {s: minmax_normalize(row) for s, row in by_setting.items()}
        for method in methods:
            strata = [list(by_setting[s][method].values()) for s in comparable]
            point, low, high = bootstrap_interval(strata, reps=options.reps, seed=options.seed)
            aggregate[method] = RobustAggregate(point, low, high, sum(len(s) for s in strata))
    return RobustSummary(metric, settings, methods, cells, comparable, aggregate, options.normalize)


def robust_summaries(runs: list[RunRecord], options: RobustOptions,
                     split_by_config: bool = False) -> list[tuple[str, list[RobustSummary]]]:
    groups, _ = group_runs(runs, split_by_config)
    return [
        (experiment, [robust_summary(groups, metric, experiment, options) for metric in METRICS])
        for experiment in experiment_order(s.experiment for s, _ in groups)
    ]


# ---------------------------------------------------------------- tables


@dataclass
class Shown:
    """One displayed number: a cell (mean +- se), an average score or an average rank."""

    mean: float
    se: float | None = None
    bold: bool = False
    underline: bool = False
    paper: tuple[float, float | None] | None = None
    n: int | None = None
    is_rank: bool = False
    p_value: float | None = None  # a cell's t-test against the best of its setting (None: the best, or no cell)


@dataclass
class Row:
    labels: list[str]
    cells: list[Shown | None]
    kind: str = "cell"  # cell | average | ranking
    rule_before: bool = False


@dataclass
class Table:
    experiment: str
    metric_label_columns: list[str]
    column_groups: list[tuple[str, int]]  # (group label, span) over the value columns; empty = none
    columns: list[str]
    rows: list[Row]
    notes: list[str]
    seed_counts: list[int] = field(default_factory=list)  # seeds per cell, every cell


@dataclass
class MetricSummary:
    """All numbers of one metric of one experiment, before layout."""

    metric: str
    settings: list[runlist.Setting]
    methods: list[str]
    cells: dict[tuple[runlist.Setting, str], Cell]
    comparable: list[runlist.Setting]  # settings where every method has results
    paper: dict


def summarize_metric(groups: dict, metric: str, experiment: str, paper: dict | None) -> MetricSummary:
    keys = [k for k in groups if k[0].experiment == experiment]
    settings = setting_order(s for s, _ in keys)
    methods = method_order(m for _, m in keys)
    cells: dict[tuple[runlist.Setting, str], Cell] = {}
    for setting in settings:
        row = {m: Cell({seed: getattr(run, metric) for seed, run in groups[(setting, m)].items()})
               for m in methods if (setting, m) in groups}  # fmt: skip
        mark_significance(row)
        cells.update({(setting, m): c for m, c in row.items()})
    comparable = [s for s in settings if all((s, m) in cells for m in methods)]
    return MetricSummary(metric, settings, methods, cells, comparable, paper or {})


def _shown(summary: MetricSummary, setting, method, with_n: bool) -> Shown | None:
    cell = summary.cells.get((setting, method))
    if cell is None:
        return None
    paper = summary.paper.get((summary.metric, setting, method))
    return Shown(cell.mean, cell.se, cell.best, cell.not_worse, paper, cell.n if with_n else None, p_value=cell.p_value)


def _aggregate_shown(summary: MetricSummary, settings: list, ranking: bool) -> list[Shown]:
    """Average score (or ranking) per method over `settings`, best in bold; paper values from its means."""
    means = {s: {m: summary.cells[(s, m)].mean for m in summary.methods} for s in settings}
    values = (average_ranks if ranking else average_scores)(means, settings)
    paper_values = None
    if summary.paper and all((summary.metric, s, m) in summary.paper for s in settings for m in summary.methods):
        paper_means = {s: {m: summary.paper[(summary.metric, s, m)][0] for m in summary.methods} for s in settings}
        paper_values = (average_ranks if ranking else average_scores)(paper_means, settings)
    best = (min if ranking else max)(values.values())
    return [
        Shown(values[m], bold=values[m] == best, is_rank=ranking,
              paper=(paper_values[m], None) if paper_values else None)
        for m in summary.methods
    ]


def _notes(summary: MetricSummary) -> list[str]:
    notes = []
    excluded = [s for s in summary.settings if s not in summary.comparable]
    if excluded:
        notes.append(
            f"{METRIC_LABELS[summary.metric]}: averages and rankings use only the settings where every method has "
            f"results; left out: {', '.join(map(str, excluded))}"
        )
    untested = sorted({(str(s), m) for (s, m), c in summary.cells.items()
                       if not c.best and c.p_value is not None and math.isnan(c.p_value)})
    if untested:
        notes.append(
            f"{METRIC_LABELS[summary.metric]}: no t-test (fewer than 2 seeds paired with the best), not underlined: "
            + ", ".join(f"{m} in {s}" for s, m in untested)
        )
    return notes


def _seed_counts_vary(summaries: list[MetricSummary]) -> bool:
    return len({c.n for s in summaries for c in s.cells.values()}) > 1


def slippery_table(summaries: list[MetricSummary]) -> Table:
    """Table 1 layout: rows metric x model; columns strategy x env, then Average score and ranking."""
    settings = setting_order(s for summary in summaries for s in summary.settings)
    strategies = list(dict.fromkeys(s.strategy for s in settings))
    envs = [e for e in ENV_ORDER if any(s.env == e for s in settings)]
    columns_settings = [runlist.Setting("slippery", e, st) for st in strategies for e in envs]
    with_n = _seed_counts_vary(summaries)
    averaged = any(len(summary.comparable) > 1 for summary in summaries)  # over one setting: its own column again
    rows, notes = [], []
    for summary in summaries:
        averages = (_aggregate_shown(summary, summary.comparable, ranking=False) if summary.comparable
                    else [None] * len(summary.methods))
        rankings = (_aggregate_shown(summary, summary.comparable, ranking=True) if summary.comparable
                    else [None] * len(summary.methods))
        for i, method in enumerate(summary.methods):
            cells = [_shown(summary, s, method, with_n) for s in columns_settings]
            cells += [averages[i], rankings[i]] if averaged else []
            label = f"{METRIC_LABELS[summary.metric]} (↑)" if i == 0 else ""
            rows.append(Row([label, method], cells, rule_before=i == 0 and bool(rows)))
        notes += _notes(summary)
    return Table(
        "slippery",
        ["Metric", "Model"],
        [(st, len(envs)) for st in strategies] + ([("Average", 2)] if averaged else []),
        [e for _ in strategies for e in envs] + (["Score", "Ranking"] if averaged else []),
        rows,
        notes,
    )


def rows_table(summaries: list[MetricSummary], experiment: str) -> Table:
    """Table 3 layout (paralysis, and any other experiment): rows metric x env x strategy with a
    per-env Average row, then Overall Average and Overall Average Ranking; columns = models."""
    methods = method_order(m for summary in summaries for m in summary.methods)
    with_n = _seed_counts_vary(summaries)
    rows, notes = [], []
    for summary in summaries:
        label = f"{METRIC_LABELS[summary.metric]} (↑)"
        first = True
        for env in ENV_ORDER:
            env_settings = [s for s in summary.settings if s.env == env]
            if not env_settings:
                continue
            for j, setting in enumerate(env_settings):
                cells = [_shown(summary, setting, m, with_n) for m in methods]
                rows.append(Row([label if first else "", env if j == 0 else "", setting.strategy], cells,
                                rule_before=first and bool(rows)))
                first = False
            env_comparable = [s for s in env_settings if s in summary.comparable]
            if len(env_comparable) > 1:  # the average of one setting would repeat its row
                rows.append(Row(["", "", "Average"], _aggregate_shown(summary, env_comparable, ranking=False),
                                kind="average"))
        if len(summary.comparable) > 1:  # over one setting the Overall rows would repeat its row
            rows.append(Row(["", "Overall Average", ""], _aggregate_shown(summary, summary.comparable, ranking=False),
                            kind="average"))
            rows.append(Row(["", "Overall Average Ranking", ""],
                            _aggregate_shown(summary, summary.comparable, ranking=True), kind="ranking"))
        notes += _notes(summary)
    return Table(experiment, ["Metric", "Environment", "Strategy"], [], methods, rows, notes)


def build_tables(runs: list[RunRecord], paper: dict | None = None,
                 split_by_config: bool = False) -> tuple[list[Table], list[RunRecord]]:
    groups, left_out = group_runs(runs, split_by_config)
    tables = []
    for experiment in experiment_order(s.experiment for s, _ in groups):
        summaries = [summarize_metric(groups, metric, experiment, paper) for metric in METRICS]
        table = slippery_table(summaries) if experiment == "slippery" else rows_table(summaries, experiment)
        table.seed_counts = [c.n for summary in summaries for c in summary.cells.values()]
        tables.append(table)
    return tables, left_out


# ---------------------------------------------------------------- rendering


def _number(value: float, decimals: int) -> str:
    """Round half up, as the paper does (its average ranking 5.25 is printed 5.3; Python's format gives 5.2)."""
    if value is None or math.isnan(value):
        return "nan"
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP))


def auto_decimals(tables: list[Table]) -> int:
    """0 decimals when every |mean| >= 100 (the paper's returns), else 2 (tiny test runs)."""
    means = [abs(c.mean) for t in tables for r in t.rows for c in r.cells if c is not None and not c.is_rank]
    return 0 if means and min(means) >= 100 else 2


TEXT_MARKS = {"best": "*", "not_worse": "~"}  # plain text (--format text): what bold and underlined are in Markdown


def _p_text(p: float) -> str:
    return "no t-test" if math.isnan(p) else f"p={p:.3g}"


def _plain(shown: Shown | None, decimals: int, rich: str, p_values: bool = False) -> str:
    """Cell text for Markdown (rich='md'), plain text (rich='text': marks instead of bold and underline) or LaTeX
    (rich='tex'); with `p_values` a cell tested against the best is followed by the test's p-value."""
    if shown is None:
        return "--" if rich == "tex" else "–"
    digits = 1 if shown.is_rank else decimals
    text = _number(shown.mean, digits)
    if shown.se is not None:
        text = (f"{text}\\sd{{\\pm {_number(shown.se, decimals)}}}" if rich == "tex"
                else f"{text} ± {_number(shown.se, decimals)}")
    if shown.n is not None:
        text += f"\\sd{{\\,(n={shown.n})}}" if rich == "tex" else f" (n={shown.n})"
    if rich == "md":
        if shown.bold:
            text = f"**{text}**"
        elif shown.underline:
            text = f"<u>{text}</u>"
    elif rich == "text":
        if shown.bold:
            text += f" {TEXT_MARKS['best']}"
        elif shown.underline:
            text += f" {TEXT_MARKS['not_worse']}"
    else:
        if shown.bold:
            text = f"\\bf {text}"
        elif shown.underline:
            text = f"\\underline{{{text}}}"
        text = f"${text}$"
    if p_values and shown.p_value is not None:
        text += f" {{\\scriptsize ({_p_text(shown.p_value)})}}" if rich == "tex" else f" ({_p_text(shown.p_value)})"
    if shown.paper is not None:
        paper_mean, paper_se = shown.paper
        paper_digits = 1 if shown.is_rank else 0  # the paper prints integers (ranks: one decimal)
        paper_text = _number(paper_mean, paper_digits) + (
            "" if paper_se is None else (" $\\pm$ " if rich == "tex" else " ± ") + _number(paper_se, 0))
        text += f" {{\\scriptsize (paper {paper_text})}}" if rich == "tex" else f" (paper {paper_text})"
    return text


def _legend(style: str, p_values: bool) -> str:
    if style == "md":
        text = ("Mean ± standard error over seeds; **bold**: highest mean; <u>underlined</u>: not significantly worse "
                f"than the best (one-sided paired t-test over seeds, p ≥ {SIGNIFICANCE_LEVEL}).")
    else:
        text = (f"Mean ± standard error over seeds; {TEXT_MARKS['best']}: highest mean; {TEXT_MARKS['not_worse']}: "
                "not significantly worse than the best (one-sided paired t-test over seeds, "
                f"p ≥ {SIGNIFICANCE_LEVEL}).")
    if p_values:
        text += (" (p=…): that test's p-value against the best cell of the same setting (no t-test: fewer than 2 "
                 "seeds paired with the best; the best itself has none).")
    return text


def few_seeds_note(seed_counts, what: str = "the t-tests behind the marks") -> str | None:
    """The line under a table whose cells have fewer than FEW_SEEDS seeds (None when every cell has enough)."""
    fewest = min(seed_counts, default=FEW_SEEDS)
    if fewest >= FEW_SEEDS:
        return None
    return (f"Fewer than {FEW_SEEDS} seeds in a cell (the fewest: {fewest}): {what} mean little there; "
            f"a claim needs at least {FEW_SEEDS} seeds per cell.")


def render_markdown(tables: list[Table], left_out: list[RunRecord], decimals: int, p_values: bool = False,
                    style: str = "md") -> str:
    """The tables in Markdown; style='text' writes the marks of plain text (render_text) instead of bold and
    underline."""
    out = []
    for table in tables:
        seeds = set(table.seed_counts)
        out.append(f"## {table.experiment}\n")
        header = list(table.metric_label_columns)
        value_headers = []
        if table.column_groups:
            i = 0
            for group, span in table.column_groups:
                value_headers += [f"{group} {c}" for c in table.columns[i : i + span]]
                i += span
        else:
            value_headers = list(table.columns)
        header += value_headers
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join(["---"] * len(table.metric_label_columns) + [":---:"] * len(value_headers)) + "|")
        for row in table.rows:
            out.append("| " + " | ".join(row.labels + [_plain(c, decimals, style, p_values) for c in row.cells]) + " |")
        out.append("")
        out.append(_legend(style, p_values) + (f" Seeds per cell: {seeds.pop()}." if len(seeds) == 1 else ""))
        few = few_seeds_note(table.seed_counts)
        out += [f"- {note}" for note in table.notes + ([few] if few else [])]
        out.append("")
    if left_out:
        out.append("## Incomplete or excluded runs (not in the tables)\n")
        out.append("| run directory | problem |")
        out.append("|---|---|")
        out += [f"| {run.run_dir} | {'; '.join(run.problems)} |" for run in left_out]
        out.append("")
    if not tables and not left_out:
        out.append("no runs found")
    return "\n".join(out)


def markdown_to_text(markdown: str) -> str:
    """Plain text for a terminal from the Markdown this module writes: a '#' heading as its text underlined, a
    pipe table as aligned columns (numbers right-aligned where the alignment row says so), the rest as it is."""
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        if lines[i].startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append([cell.strip() for cell in lines[i].strip().split("|")[1:-1]])
                i += 1
            out += _aligned_columns(block)
            continue
        hashes, _, title = lines[i].partition(" ")
        if hashes and set(hashes) == {"#"} and title:
            out += [title, ("=" if len(hashes) <= 2 else "-") * len(title)]
        else:
            out.append(lines[i])
        i += 1
    return "\n".join(out)


def _aligned_columns(block: list[list[str]]) -> list[str]:
    is_rule = len(block) > 1 and all(cell and set(cell) <= {"-", ":"} for cell in block[1])
    rows = [block[0]] + block[2 if is_rule else 1 :]
    right = [cell.endswith(":") and not cell.startswith(":") for cell in block[1]] if is_rule else []
    width = [max(len(row[j]) if j < len(row) else 0 for row in rows) for j in range(max(map(len, rows)))]
    aligned = []
    for k, row in enumerate(rows):
        cells = [(row[j] if j < len(row) else "").rjust(width[j]) if j < len(right) and right[j]
                 else (row[j] if j < len(row) else "").ljust(width[j])
                 for j in range(len(width))]  # fmt: skip
        aligned.append("  ".join(cells).rstrip())
        if k == 0:
            aligned.append("  ".join("-" * w for w in width))
    return aligned


def render_text(tables: list[Table], left_out: list[RunRecord], decimals: int, p_values: bool = False) -> str:
    """The tables as plain text for a terminal: aligned columns, no Markdown or HTML; the highest mean marked
    TEXT_MARKS['best'] and the cells not significantly worse than it TEXT_MARKS['not_worse'], as the legend says."""
    return markdown_to_text(render_markdown(tables, left_out, decimals, p_values, style="text"))


def render_latex(tables: list[Table], left_out: list[RunRecord], decimals: int, p_values: bool = False) -> str:
    out = [
        "% Needs \\usepackage{booktabs}; \\sd as in the paper:",
        "\\providecommand{\\sd}[1]{\\scriptstyle #1}",
    ]
    for table in tables:
        n_labels, n_values = len(table.metric_label_columns), len(table.columns)
        out += ["", f"% {table.experiment}", "\\begin{tabular}{@{}" + "c" * (n_labels + n_values) + "@{}}", "\\toprule"]
        if table.column_groups:
            groups = " & ".join(f"\\multicolumn{{{span}}}{{c}}{{\\texttt{{{g}}}}}" for g, span in table.column_groups)
            out.append(" & " * n_labels + groups + " \\\\")
            start = n_labels + 1
            rules = []
            for _, span in table.column_groups:
                rules.append(f"\\cmidrule(lr){{{start}-{start + span - 1}}}")
                start += span
            out.append(" ".join(rules))
        else:
            out.append(" & " * n_labels + f"\\multicolumn{{{n_values}}}{{c}}{{Model}} \\\\ "
                       f"\\cmidrule(lr){{{n_labels + 1}-{n_labels + n_values}}}")
        tex = lambda s: s.replace("_", "\\_").replace("(↑)", "($\\uparrow$)")  # noqa: E731
        out.append(" & ".join(table.metric_label_columns + [f"\\texttt{{{tex(c)}}}" for c in table.columns])
                   + " \\\\ \\midrule")
        for row in table.rows:
            if row.rule_before:
                out.append("\\midrule")
            out.append(" & ".join([tex(label) for label in row.labels]
                                  + [_plain(c, decimals, "tex", p_values) for c in row.cells]) + " \\\\")
        out += ["\\bottomrule", "\\end{tabular}"]
        out += [f"% {note}" for note in table.notes]
    for run in left_out:
        out.append(f"% left out: {run.run_dir}: {'; '.join(run.problems)}")
    return "\n".join(out)


CSV_FIELDS = ["experiment", "metric", "row", "env", "strategy", "method", "n", "mean", "se", "best",
              "not_significantly_worse", "p_value", "paper_mean", "paper_se"]  # fmt: skip


def csv_rows(runs: list[RunRecord], paper: dict | None = None, split_by_config: bool = False) -> list[dict]:
    """Long format: one row per cell (row='cell') plus average score / ranking rows."""
    groups, _ = group_runs(runs, split_by_config)
    rows = []
    for experiment in experiment_order(s.experiment for s, _ in groups):
        for metric in METRICS:
            summary = summarize_metric(groups, metric, experiment, paper)
            for (setting, method), cell in sorted(summary.cells.items(),
                                                  key=lambda kv: (summary.settings.index(kv[0][0]),
                                                                  summary.methods.index(kv[0][1]))):
                paper_value = summary.paper.get((metric, setting, method), (None, None))
                rows.append({
                    "experiment": experiment, "metric": metric, "row": "cell", "env": setting.env,
                    "strategy": setting.strategy, "method": method, "n": cell.n, "mean": cell.mean, "se": cell.se,
                    "best": cell.best, "not_significantly_worse": cell.not_worse,
                    "p_value": "" if cell.p_value is None else cell.p_value,
                    "paper_mean": paper_value[0], "paper_se": paper_value[1],
                })  # fmt: skip
            if not summary.comparable:
                continue
            scopes = ([(env, [s for s in summary.comparable if s.env == env]) for env in ENV_ORDER]
                      if experiment != "slippery" else [])
            scopes.append(("all", summary.comparable))
            for env, settings in scopes:
                if not settings:
                    continue
                for kind, ranking in (("average_score", False), ("average_ranking", True)):
                    if ranking and env != "all":
                        continue
                    for method, shown in zip(summary.methods, _aggregate_shown(summary, settings, ranking)):
                        rows.append({
                            "experiment": experiment, "metric": metric, "row": kind, "env": env, "strategy": "",
                            "method": method, "n": len(settings), "mean": shown.mean, "se": "", "best": shown.bold,
                            "not_significantly_worse": "", "p_value": "",
                            "paper_mean": shown.paper[0] if shown.paper else None, "paper_se": "",
                        })  # fmt: skip
    return rows


def render_csv(runs: list[RunRecord], paper: dict | None, robust: RobustOptions | None = None,
               split_by_config: bool = False) -> str:
    """The long-format CSV; with `robust`, the columns ROBUST_CSV_FIELDS are added (filled on the cell rows)
    and row='aggregate_iqm' rows follow each experiment's rows."""
    import io

    rows = csv_rows(runs, paper, split_by_config)
    fields = CSV_FIELDS
    if robust is not None:
        fields = CSV_FIELDS + ROBUST_CSV_FIELDS
        extra, aggregate_rows = robust_csv_rows(robust_summaries(runs, robust, split_by_config), robust)
        merged = []
        for i, row in enumerate(rows):
            if row["row"] == "cell":
                row = row | extra[(row["experiment"], row["metric"], row["env"], row["strategy"], row["method"])]
            merged.append(row)
            last_of_experiment = i + 1 == len(rows) or rows[i + 1]["experiment"] != row["experiment"]
            if last_of_experiment:
                merged += [r for r in aggregate_rows if r["experiment"] == row["experiment"]]
        rows = merged
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def render_robust_markdown(robust: list[tuple[str, list[RobustSummary]]], options: RobustOptions, decimals: int) -> str:
    """The --robust section: per experiment and metric, IQM [95% CI] per cell and the aggregate IQM per
    method, then every seed's value (and how many seeds are above the threshold)."""
    n = _number
    aggregate_decimals = max(decimals, 3) if options.normalize == "minmax" else decimals
    interval = lambda point, low, high, digits: (  # noqa: E731
        f"{n(point, digits)} [{n(low, digits)}, {n(high, digits)}]")
    out = []
    for experiment, summaries in robust:
        out.append(f"## {experiment}: robust statistics (IQM, stratified bootstrap)\n")
        for summary in summaries:
            label = METRIC_LABELS[summary.metric]
            out.append(f"### {label}: interquartile mean [95% CI]\n")
            out.append("| Environment | Strategy | " + " | ".join(summary.methods) + " |")
            out.append("|---|---|" + "|".join([":---:"] * len(summary.methods)) + "|")
            for setting in summary.settings:
                cells = []
                for method in summary.methods:
                    cell = summary.cells.get((setting, method))
                    if cell is None:
                        cells.append("–")
                        continue
                    text = interval(cell.iqm, cell.low, cell.high, decimals) + f" (n={cell.n})"
                    if cell.n_above is not None:
                        text += f", {cell.n_above}/{cell.n} > {n(options.threshold, decimals)}"
                    cells.append(text)
                out.append(f"| {setting.env} | {setting.strategy} | " + " | ".join(cells) + " |")
            if summary.aggregate:
                scale = "min-max normalized per setting" if summary.normalize == "minmax" else "raw returns"
                cells = [interval(a.iqm, a.low, a.high, aggregate_decimals) + f" (n={a.n_runs})"
                         for a in (summary.aggregate[m] for m in summary.methods)]  # fmt: skip
                out.append(f"| Aggregate IQM | {len(summary.comparable)} settings, {scale} | "
                           + " | ".join(cells) + " |")
            excluded = [s for s in summary.settings if s not in summary.comparable]
            if excluded:
                out.append("\n- the aggregate leaves out the settings where some method has no results: "
                           f"{', '.join(map(str, excluded))}")
            out.append("")
            out.append(f"### {label}: every seed\n")
            above = options.threshold is not None
            out.append("| Environment | Strategy | Method | n |"
                       + (f" > {n(options.threshold, decimals)} |" if above else "") + " seed: value |")
            out.append("|---|---|---|---:|" + ("---:|" if above else "") + "---|")
            for setting in summary.settings:
                for method in summary.methods:
                    cell = summary.cells.get((setting, method))
                    if cell is None:
                        continue
                    seeds = ", ".join(f"{seed}: {n(cell.values[seed], decimals)}" for seed in sorted(cell.values))
                    out.append(f"| {setting.env} | {setting.strategy} | {method} | {cell.n} |"
                               + (f" {cell.n_above} |" if above else "") + f" {seeds} |")
            out.append("")
        few = few_seeds_note([c.n for summary in summaries for c in summary.cells.values()], "the bootstrap intervals")
        if few:
            out += [few, ""]
        out.append(
            "IQM: mean of the seeds left after cutting the lowest and highest quarter (floor(n/4) each; the plain mean "
            f"for n < 4); [95% CI]: 2.5 and 97.5 percentiles of the IQM over {options.reps} bootstrap resamples of the "
            f"seeds (numpy seed {options.seed}). "
            "Aggregate IQM: the IQM of all runs of a method over the settings where every method has results, "
            "resampled within each setting (stratified bootstrap; Agarwal et al. 2021)."
        )
        out.append("")
    return "\n".join(out)


ROBUST_CSV_FIELDS = ["iqm", "iqm_ci_low", "iqm_ci_high", "normalize", "threshold", "n_above", "seed_values"]


def robust_csv_rows(robust: list[tuple[str, list[RobustSummary]]], options: RobustOptions) -> tuple[dict, list[dict]]:
    """(extra columns of each cell row, keyed by (experiment, metric, env, strategy, method); the
    row='aggregate_iqm' rows, env='all', n = runs pooled)."""
    extra, aggregate_rows = {}, []
    for experiment, summaries in robust:
        for summary in summaries:
            for (setting, method), cell in summary.cells.items():
                extra[(experiment, summary.metric, setting.env, setting.strategy, method)] = {
                    "iqm": cell.iqm, "iqm_ci_low": cell.low, "iqm_ci_high": cell.high, "normalize": "none",
                    "threshold": options.threshold, "n_above": cell.n_above,
                    "seed_values": ";".join(f"{seed}:{cell.values[seed]!r}" for seed in sorted(cell.values)),
                }  # fmt: skip
            for method in summary.methods:
                if method not in summary.aggregate:
                    continue
                a = summary.aggregate[method]
                aggregate_rows.append({
                    "experiment": experiment, "metric": summary.metric, "row": "aggregate_iqm", "env": "all",
                    "strategy": "", "method": method, "n": a.n_runs, "iqm": a.iqm, "iqm_ci_low": a.low,
                    "iqm_ci_high": a.high, "normalize": summary.normalize,
                })  # fmt: skip
    return extra, aggregate_rows


# ---------------------------------------------------------------- kappa grid search


def select_kappa(runs: list[RunRecord]) -> tuple[list[dict], list[str]]:
    """Per setting and EPPO variant, the kappa with the best mean AULC over complete runs (ties: the
    smaller kappa). Returns rows in scripts/paper_kappa.csv format and a report of every kappa's mean."""
    aulcs: dict[tuple[runlist.Setting, str, float], list[float]] = {}
    for run in runs:
        if run.complete and run.method in runlist.KAPPA_COLUMNS and run.kappa is not None:
            aulcs.setdefault((run.setting, run.method, float(run.kappa)), []).append(run.aulc)
    chosen: dict[runlist.Setting, dict[str, float]] = {}
    report = []
    for setting in setting_order(s for s, _, _ in aulcs):
        for method in runlist.KAPPA_COLUMNS:
            candidates = sorted((k, aulcs[(s, m, k)]) for s, m, k in aulcs if s == setting and m == method)
            if not candidates:
                continue
            best_kappa = max(candidates, key=lambda kv: (np.mean(kv[1]), -kv[0]))[0]
            chosen.setdefault(setting, {})[method] = best_kappa
            report.append(f"{setting} {method}: " + ", ".join(
                f"kappa={runlist.format_kappa(k)}: AULC {np.mean(v):.2f} (n={len(v)})"
                f"{' <- best' if k == best_kappa else ''}" for k, v in candidates
            ))  # fmt: skip
    rows = [
        {"experiment": s.experiment, "env": s.env, "strategy": s.strategy,
         **{column: runlist.format_kappa(chosen[s][m]) if m in chosen[s] else ""
            for m, column in runlist.KAPPA_COLUMNS.items()}}
        for s in chosen
    ]  # fmt: skip
    return rows, report


# ---------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block: the line names the flag and its valid choices
        self.exit(2, f"error: {message}\n")


def config_error(conflicts: list[ConfigConflict]) -> str:
    """What main prints when the runs of a cell differ: a line saying so, then one line per group of runs that
    agree: cell, the keys its groups differ in with this group's values, the run directories."""
    lines = [f"error: the runs of {len(conflicts)} cell(s) differ in config.json (every key but the bookkeeping ones, "
             "BOOKKEEPING_KEYS in scripts/summarize.py); pooling them would average different experiments. One line "
             "per group of runs that agree (cell: values: run directories); --split-by-config shows each group as its "
             "own column:"]  # fmt: skip
    return "\n".join(lines + [line for conflict in conflicts for line in conflict.lines()])


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="sweep root (searched recursively for run directories)")
    parser.add_argument("--format", choices=("markdown", "text", "csv", "latex"),
                        help="markdown (the default when the output is a file or a pipe), text (plain aligned columns, "
                             "no Markdown or HTML: the default on a terminal), csv (long format) or latex")  # fmt: skip
    parser.add_argument("--paper", action="store_true",
                        help="show the paper's numbers (scripts/paper_results.csv) beside ours")
    parser.add_argument("--methods", help="comma list of methods to keep (default: all found)")
    parser.add_argument("--decimals", type=int,
                        help="decimals of means and standard errors (default: 0 for returns >= 100, else 2)")
    parser.add_argument("--p-values", action="store_true",
                        help="follow each cell with the p-value of its t-test against the best of its setting "
                             "(Markdown, text, LaTeX; the CSV has them always, column p_value)")  # fmt: skip
    parser.add_argument("--split-by-config", action="store_true",
                        help="runs of one setting and method that differ in their flags (config.json): show each group "
                             "of runs that agree as its own column, labelled by the flags it differs in, instead of "
                             "stopping (exit 2)")  # fmt: skip
    parser.add_argument("--select-kappa", action="store_true",
                        help="print the best kappa per setting (paper_kappa.csv format) instead of tables")
    parser.add_argument("--output", help="write to this file instead of stdout")
    robust = parser.add_argument_group("robust statistics (Agarwal et al. 2021; Markdown, text and CSV)")
    robust.add_argument("--robust", action="store_true",
                        help="add the interquartile mean with stratified-bootstrap 95%% intervals per cell and "
                             "aggregated over settings per method, and every seed's value")  # fmt: skip
    robust.add_argument("--threshold", type=float,
                        help="with --robust: count the seeds of each cell whose metric is above this value")
    robust.add_argument("--normalize", choices=NORMALIZATIONS,
                        help="with --robust: scale of the aggregate IQM: raw returns (none, the default) or min-max "
                             "per setting over every run of every method shown (minmax)")  # fmt: skip
    robust.add_argument("--bootstrap-reps", type=int,
                        help=f"with --robust: bootstrap resamples (default {BOOTSTRAP_REPS})")
    robust.add_argument("--bootstrap-seed", type=int, help="with --robust: seed of the resampling (default 0)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help (0), or a bad flag (2, its line printed)
        return int(stop.code or 0)
    if args.format is None:  # Markdown into files and pipes (the committed tables); a terminal shows no Markdown
        args.format = "text" if args.output is None and not args.select_kappa and sys.stdout.isatty() else "markdown"
    robust_flags = [f"--{name.replace('_', '-')}"
                    for name in ("threshold", "normalize", "bootstrap_reps", "bootstrap_seed")
                    if getattr(args, name) is not None]  # fmt: skip
    if robust_flags and not args.robust:
        print(f"error: {', '.join(robust_flags)} only apply with --robust", file=sys.stderr)
        return 2
    if args.robust and (args.format == "latex" or args.select_kappa):
        print("error: --robust writes Markdown, text or CSV (not with --format latex or --select-kappa)",
              file=sys.stderr)
        return 2
    if args.p_values and (args.format == "csv" or args.select_kappa):
        print("error: --p-values applies to --format markdown, text or latex (the CSV has them always, "
              "column p_value), not to --select-kappa", file=sys.stderr)  # fmt: skip
        return 2
    if args.split_by_config and args.select_kappa:
        print("error: --split-by-config does not apply to --select-kappa "
              "(a kappa's runs must agree in every other flag)", file=sys.stderr)
        return 2
    if args.bootstrap_reps is not None and args.bootstrap_reps < 1:
        print("error: --bootstrap-reps must be >= 1", file=sys.stderr)
        return 2
    options = None
    if args.robust:
        options = RobustOptions(
            reps=args.bootstrap_reps if args.bootstrap_reps is not None else BOOTSTRAP_REPS,
            seed=args.bootstrap_seed if args.bootstrap_seed is not None else 0,
            threshold=args.threshold,
            normalize=args.normalize or "none",
        )
    if not os.path.isdir(args.root):
        print(f"error: {args.root} is not a directory", file=sys.stderr)
        return 2
    if args.decimals is not None and args.decimals < 0:
        print("error: --decimals must be >= 0", file=sys.stderr)
        return 2
    runs = load_runs(args.root)
    if args.methods:
        keep = [m.strip() for m in args.methods.split(",") if m.strip()]
        runs = [r for r in runs if r.method in keep]
    conflicts = config_conflicts(runs)
    if conflicts and not args.split_by_config:
        print(config_error(conflicts), file=sys.stderr)
        return 2
    split = args.split_by_config
    paper = read_paper_results() if args.paper else None

    if args.select_kappa:
        rows, report = select_kappa(runs)
        if not rows:
            print(f"error: no complete EPPO_cor/EPPO_ind runs with a kappa under {args.root}", file=sys.stderr)
            return 1
        print("\n".join(report), file=sys.stderr)
        import io

        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, ["experiment", "env", "strategy", *runlist.KAPPA_COLUMNS.values()],
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    elif args.format == "csv":
        text = render_csv(runs, paper, options, split)
        for run in group_runs(runs, split)[1]:
            print(f"left out (incomplete or duplicate): {run.run_dir}: {'; '.join(run.problems)}", file=sys.stderr)
    else:
        tables, left_out = build_tables(runs, paper, split)
        decimals = args.decimals if args.decimals is not None else auto_decimals(tables)
        if args.format == "latex":
            text = render_latex(tables, left_out, decimals, args.p_values)
        else:
            style = "md" if args.format == "markdown" else "text"
            if options is not None and tables:  # the robust section after the tables, before the runs left out
                text = "\n".join([render_markdown(tables, [], decimals, args.p_values, style),
                                  render_robust_markdown(robust_summaries(runs, options, split), options, decimals)]
                                 + ([render_markdown([], left_out, decimals, style=style)]
                                    if left_out else []))  # fmt: skip
            else:
                text = render_markdown(tables, left_out, decimals, args.p_values, style)
            if style == "text":
                text = markdown_to_text(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
