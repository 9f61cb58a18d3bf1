"""Percentage state coverage of training runs (EPPO paper, Section 4 "Exploration analysis",
Appendix "Exploration analysis"; metric of Mayor et al., 2025).

For every run directory the visited states saved by `--save-states` (`<run-dir>/states.npz`, key
"observations") are projected to 2-D with UMAP (default parameters, fixed random_state), min-max
normalised per axis to [0, 1) with epsilon 1e-5, binned into a G x G grid, and the coverage is
100 * occupied cells / G^2. The UMAP projection is fitted per run: coverage measures the spread of
one run's own states.

Usage:
    python scripts/coverage.py RUN_DIR [RUN_DIR ...] [--grid-size 100] [--max-points N]
                               [--seed 0] [--format markdown|csv]

Prints one row per run and, per (setting, method), mean ± standard error over runs
(SE = std(ddof=1) / sqrt(n)); --format csv prints both as one table (column `level`: run/method).
Method, setting and seed come from each run's config.json ("method", else "script" or args
"exp_name" with args "variant" for EPPO; args "env_id", "experiment", "strategy", "seed"); what it
lacks is taken from the sweep layout <root>/<experiment>/<env>/<strategy>/<method>/seed<k>.

The paper used cuML's GPU UMAP; this script uses umap-learn on the CPU with the same nominal
defaults (n_neighbors=15, min_dist=0.1), so numbers are comparable in kind, not bit-for-bit.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import sys
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__:  # imported as scripts.coverage
    from . import runlist, summarize
else:  # run as python scripts/coverage.py
    import runlist
    import summarize

    # Python put scripts/ first on sys.path, where this file shadows the `coverage` package that
    # numba (imported by umap) probes for and then crashes on; the sibling modules are loaded now.
    _SCRIPTS_DIR = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _SCRIPTS_DIR]

# Appendix "Exploration analysis": min-max normalisation "with a small epsilon (1e-5)".
NORMALIZATION_EPSILON = 1e-5
# UMAP's default n_neighbors is 15: fewer than 16 states cannot give every state 15 neighbours.
MIN_POINTS = 16
UNKNOWN = "?"


class CoverageError(Exception):
    """Bad input for the coverage computation; main() prints it and exits with code 2."""


def coverage_percentage(points, grid_size: int = 100) -> float:
    """Percentage coverage of 2-D points (EPPO paper, Appendix "Exploration analysis").

    Each axis is min-max normalised, x' = (x - min) / (max - min + 1e-5) in [0, 1), every point is
    assigned the cell (min(floor(x' G), G - 1), min(floor(y' G), G - 1)), and the result is
    100 * |occupied cells| / G^2. A set of identical points occupies exactly one cell.
    """
    if isinstance(grid_size, bool) or not isinstance(grid_size, (int, np.integer)) or grid_size < 1:
        raise ValueError(f"grid_size must be a positive integer, got {grid_size!r}")
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 2 or points.shape[0] == 0:
        raise ValueError(f"points must have shape (N >= 1, 2), got {points.shape}")
    if not np.isfinite(points).all():
        raise ValueError("points contain NaN or inf")
    low = points.min(axis=0)
    high = points.max(axis=0)
    scaled = (points - low) / (high - low + NORMALIZATION_EPSILON)
    cells = np.minimum(np.floor(scaled * grid_size).astype(np.int64), grid_size - 1)
    occupied = np.unique(cells[:, 0] * grid_size + cells[:, 1]).size
    return 100.0 * occupied / grid_size**2


def project_umap(observations: np.ndarray, seed: int) -> np.ndarray:
    """2-D UMAP embedding (umap-learn, default parameters, random_state=seed) of (N, d) states."""
    try:
        import umap  # imported lazily: numba compilation makes the import take seconds
    except ImportError as error:
        raise CoverageError(f"umap-learn is required ({error}); run `pip install -r requirements-dev.txt`") from error
    with warnings.catch_warnings():
        # A fixed random_state makes umap-learn single-threaded and it warns about it; that is intended.
        warnings.filterwarnings("ignore", message=".*n_jobs value.*overridden.*")
        reducer = umap.UMAP(n_components=2, random_state=seed)
        return reducer.fit_transform(np.asarray(observations, dtype=np.float32))


def _states_path(run_dir: Path) -> Path:
    """<run_dir>/states.npz, checked to exist and to hold an 'observations' array (not loaded yet)."""
    if not run_dir.is_dir():
        raise CoverageError(f"run directory {run_dir} does not exist")
    states_path = run_dir / "states.npz"
    if not states_path.is_file():
        raise CoverageError(
            f"{run_dir} has no states.npz: coverage needs the visited states; "
            "re-run the training command with --save-states"
        )
    try:
        with np.load(states_path, allow_pickle=False) as states:
            keys = states.files
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise CoverageError(f"cannot read {states_path}: {error}") from error
    if "observations" not in keys:
        raise CoverageError(f"{states_path} has no 'observations' array (keys: {sorted(keys)})")
    return states_path


def load_observations(run_dir: Path) -> np.ndarray:
    """The saved observations of a run as a float32 (N, obs_dim) array; CoverageError if unusable."""
    states_path = _states_path(run_dir)
    try:
        with np.load(states_path, allow_pickle=False) as states:
            observations = states["observations"]
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise CoverageError(f"cannot read {states_path}: {error}") from error
    if observations.ndim != 2:
        raise CoverageError(f"{states_path}: 'observations' must be (N, obs_dim), got shape {observations.shape}")
    if observations.shape[0] < MIN_POINTS:
        raise CoverageError(
            f"{states_path}: {observations.shape[0]} states; UMAP (n_neighbors=15) needs at least {MIN_POINTS}"
        )
    observations = observations.astype(np.float32)
    bad = int((~np.isfinite(observations)).any(axis=1).sum())
    if bad:
        raise CoverageError(f"{states_path}: {bad} states contain NaN or inf (float16 overflow?)")
    return observations


@dataclass(frozen=True)
class RunInfo:
    """Where a run belongs: its setting (experiment, env, strategy), method and seed."""

    run_dir: Path
    setting: runlist.Setting
    method: str
    seed: int | None


def _env_name(env: str) -> str:
    try:
        return runlist.env_name(env)
    except runlist.RunListError:
        return env


def describe_run(run_dir: Path) -> RunInfo:
    """Setting, method and seed of a run from config.json ({"args": ..., "script", "method"}, as the
    algorithm scripts write it; a flat dict of args is read too); what it lacks comes from the sweep
    layout <root>/<experiment>/<env>/<strategy>/<method>/seed<k>."""
    config: dict = {}
    config_path = run_dir / "config.json"
    if config_path.is_file():
        try:
            loaded = json.loads(config_path.read_text())
            config = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError) as error:
            print(f"warning: ignoring unreadable {config_path}: {error}", file=sys.stderr)
    args = config.get("args", config)
    args = args if isinstance(args, dict) else {}
    script = config.get("script") or (f"{args['exp_name']}.py" if args.get("exp_name") else None)
    method = config.get("method") or (runlist.method_for_script(script, args.get("variant")) if script else None)
    path_identity = summarize.identity_from_path(str(run_dir.resolve()))
    path_setting, path_method, path_seed = path_identity or (None, None, None)

    experiment = args.get("experiment") or (path_setting and path_setting.experiment) or UNKNOWN
    env = _env_name(str(args["env_id"])) if args.get("env_id") else (path_setting and path_setting.env) or UNKNOWN
    strategy = args.get("strategy") or (path_setting and path_setting.strategy) or UNKNOWN
    method = method or path_method or (Path(script).stem if script else None)
    if method is None:
        print(
            f"warning: cannot tell the method of {run_dir} (no method/script in config.json and the path is not "
            "<root>/<experiment>/<env>/<strategy>/<method>/seed<k>); using the directory name",
            file=sys.stderr,
        )
        method = run_dir.resolve().name
    seed = args.get("seed", path_seed)
    seed = int(seed) if str(seed).isdigit() else None
    return RunInfo(run_dir, runlist.Setting(str(experiment), str(env), str(strategy)), str(method), seed)


def subsample(observations: np.ndarray, max_points: int | None, seed: int) -> np.ndarray:
    """At most max_points rows, drawn uniformly without replacement (order kept)."""
    if max_points is None or observations.shape[0] <= max_points:
        return observations
    keep = np.random.default_rng(seed).choice(observations.shape[0], size=max_points, replace=False)
    return observations[np.sort(keep)]


@dataclass(frozen=True)
class RunCoverage:
    info: RunInfo
    states: int  # number of projected states
    coverage: float  # percent


@dataclass(frozen=True)
class MethodCoverage:
    setting: runlist.Setting
    method: str
    runs: int
    mean: float
    se: float  # NaN for a single run


def sort_and_summarize(rows: list[RunCoverage]) -> tuple[list[RunCoverage], list[MethodCoverage]]:
    """Rows in the paper's order (setting, method, seed) and, per (setting, method), the number of
    runs with the mean and standard error (std(ddof=1) / sqrt(n)) of their coverage."""
    settings = summarize.setting_order(row.info.setting for row in rows)
    methods = summarize.method_order(row.info.method for row in rows)

    def run_key(row: RunCoverage) -> tuple:
        info = row.info
        seed_key = (info.seed is None, info.seed or 0)
        return settings.index(info.setting), methods.index(info.method), seed_key, str(info.run_dir)

    rows = sorted(rows, key=run_key)
    groups: dict[tuple[runlist.Setting, str], list[float]] = {}
    for row in rows:
        groups.setdefault((row.info.setting, row.info.method), []).append(row.coverage)
    summary = []
    for (setting, method), values in groups.items():
        mean, standard_error = summarize.mean_se(values)
        summary.append(MethodCoverage(setting, method, len(values), mean, standard_error))
    return rows, summary


def format_markdown(rows: list[RunCoverage], summary: list[MethodCoverage], grid_size: int, seed: int) -> str:
    lines = [
        f"## Coverage per run (grid {grid_size} x {grid_size}, UMAP random_state {seed})",
        "",
        "| setting | method | seed | states | coverage (%) | run dir |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        info = row.info
        seed_text = UNKNOWN if info.seed is None else info.seed
        lines.append(f"| {info.setting} | {info.method} | {seed_text} | {row.states} | {row.coverage:.2f} "
                     f"| {info.run_dir} |")
    lines += [
        "",
        "## Coverage per method (mean ± standard error over runs)",
        "",
        "| setting | method | runs | coverage (%) |",
        "|---|---|---|---|",
    ]
    for group in summary:
        se_text = "n/a" if math.isnan(group.se) else f"{group.se:.2f}"
        lines.append(f"| {group.setting} | {group.method} | {group.runs} | {group.mean:.2f} ± {se_text} |")
    return "\n".join(lines)


CSV_COLUMNS = (
    "level", "experiment", "env", "strategy", "method", "seed", "runs", "states", "coverage", "coverage_se", "run_dir",
)  # fmt: skip


def format_csv(rows: list[RunCoverage], summary: list[MethodCoverage]) -> str:
    """One table: a level=run row per run, then a level=method row per (setting, method) with the
    mean and standard error over its runs (coverage_se empty for a single run)."""

    def number(value: float) -> str:
        return "" if math.isnan(value) else f"{value:.10g}"

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        setting = row.info.setting
        writer.writerow(["run", setting.experiment, setting.env, setting.strategy, row.info.method,
                         "" if row.info.seed is None else row.info.seed, 1, row.states, number(row.coverage), "",
                         row.info.run_dir])  # fmt: skip
    for group in summary:
        setting = group.setting
        writer.writerow(["method", setting.experiment, setting.env, setting.strategy, group.method, "", group.runs, "",
                         number(group.mean), number(group.se), ""])  # fmt: skip
    return buffer.getvalue().rstrip("\n")


def _warn_about_incomparable_runs(rows: list[RunCoverage]) -> None:
    """Coverage grows with the number of projected states: flag settings whose runs differ in it,
    and (method, seed) pairs that appear twice (the same run under two paths, or copies)."""
    by_setting: dict[runlist.Setting, list[RunCoverage]] = {}
    for row in rows:
        by_setting.setdefault(row.info.setting, []).append(row)
    for setting, members in by_setting.items():
        counts = [row.states for row in members]
        if min(counts) != max(counts):
            print(
                f"warning: runs of {setting} have {min(counts)} to {max(counts)} states; coverage grows with the "
                "number of states, pass --max-points to compare equal counts",
                file=sys.stderr,
            )
        seen = set()
        for row in members:
            key = (row.info.method, row.info.seed)
            if row.info.seed is not None and key in seen:
                print(f"warning: {setting} {key[0]} seed {key[1]} appears more than once", file=sys.stderr)
            seen.add(key)


def _positive_int(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Percentage state coverage (EPPO paper, exploration analysis) of runs saved with --save-states."
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories with states.npz")
    parser.add_argument("--grid-size", type=_positive_int(1), default=100, help="grid cells per axis G (paper: 100)")
    parser.add_argument(
        "--max-points",
        type=_positive_int(MIN_POINTS),
        default=None,
        help="project at most this many states per run, drawn uniformly without replacement (default: all); "
        "coverage grows with the number of states, so compare runs with equal counts",
    )
    parser.add_argument("--seed", type=int, default=0, help="UMAP random_state and subsampling seed")
    parser.add_argument("--format", choices=("markdown", "csv"), default="markdown", help="output table format")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    resolved = [run_dir.resolve() for run_dir in args.run_dirs]
    duplicates = sorted({str(path) for path in resolved if resolved.count(path) > 1})
    if duplicates:
        print(f"error: run directories given more than once: {', '.join(duplicates)}", file=sys.stderr)
        return 2
    try:
        # Check every run first so that a missing states.npz fails before minutes of UMAP.
        infos = []
        for run_dir in args.run_dirs:
            _states_path(run_dir)
            infos.append(describe_run(run_dir))
        rows = []
        for info in infos:
            observations = subsample(load_observations(info.run_dir), args.max_points, args.seed)
            print(f"projecting {info.run_dir} ({observations.shape[0]} states) with UMAP ...", file=sys.stderr)
            embedding = project_umap(observations, args.seed)
            try:
                coverage = coverage_percentage(embedding, args.grid_size)
            except ValueError as error:
                raise CoverageError(f"UMAP embedding of {info.run_dir}: {error}") from error
            rows.append(RunCoverage(info, observations.shape[0], coverage))
    except CoverageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows, summary = sort_and_summarize(rows)
    _warn_about_incomparable_runs(rows)
    if args.format == "csv":
        print(format_csv(rows, summary))
    else:
        print(format_markdown(rows, summary, args.grid_size, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
