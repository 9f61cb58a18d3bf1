"""Build the run list of a sweep: methods x settings x seeds -> one line per run.

The single place that knows how a sweep name (PPO, EPPO_cor, ...) maps to an algorithm script,
which settings the paper uses, which kappa a setting gets, and where a run's directory lies.
The paper's methods are listed (METHODS); every other *_continuous.py of --scripts-dir is a method too,
named by its `method_name` (see discovered_methods), so a new script needs no entry here.
scripts/sweep.sh, scripts/slurm_sweep.sh and scripts/grid_search_kappa.sh all call it, and
scripts/summarize.py imports its tables, so none of them repeats this logic.

Output: one line per run, `RUN_DIR<TAB>COMMAND`, COMMAND being a shell-quoted command line.
Run directories are deterministic: <root>/<experiment>/<env>/<strategy>/<method>/seed<k>
(with --kappa-grid: <root>/kappa<K>/<experiment>/<env>/<strategy>/<method>/seed<k>).
With --seeds-per-process K, one line trains up to K consecutive seeds of one method x setting in one process
(`--seed s --num-seeds n --run-dir .../seed{seed}`; each seed still writes its own directory) and RUN_DIR is
the directory of its first seed, where the process's stdout.log/stderr.log go. With --pending, finished seeds
are left out before packing, so a pack never retrains a finished seed.

    python scripts/runlist.py --methods PPO,EPPO_ind --settings paralysis/HalfCheetah/back-one \
        --seeds 1-3 --root runs/sweep -- --num-envs 1
"""

from __future__ import annotations

import argparse
import ast
import csv
import functools
import os
import shlex
import sys
from dataclasses import dataclass

SCRIPTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPTS_DIR)
PAPER_KAPPA_CSV = os.path.join(SCRIPTS_DIR, "paper_kappa.csv")

# Sweep name -> (algorithm script, fixed flags). Order = the paper's table column order.
METHODS: dict[str, tuple[str, tuple[str, ...]]] = {
    "PPO": ("ppo_continuous.py", ()),
    "PFO": ("pfo_continuous.py", ()),
    "CB": ("cb_continuous.py", ()),
    "PPO_DRND": ("ppo_drnd_continuous.py", ()),
    "EPPO_mean": ("eppo_continuous.py", ("--variant", "mean", "--kappa", "0")),
    "EPPO_cor": ("eppo_continuous.py", ("--variant", "cor")),
    "EPPO_ind": ("eppo_continuous.py", ("--variant", "ind")),
}
SCRIPT_SUFFIX = "_continuous.py"
# Methods whose --kappa comes from scripts/paper_kappa.csv (column name) unless --kappa is given.
KAPPA_COLUMNS = {"EPPO_cor": "kappa_cor", "EPPO_ind": "kappa_ind"}
ENV_IDS = {"Ant": "Ant-v5", "HalfCheetah": "HalfCheetah-v5"}
EXPERIMENTS = ("slippery", "paralysis")
# Flags the run list sets itself; passing them as extra flags would silently fight the layout.
RESERVED_FLAGS = ("--run-dir", "--seed", "--num-seeds", "--env-id", "--experiment", "--strategy", "--variant",
                  "--kappa")


class RunListError(ValueError):
    """Invalid sweep specification (CLI exits 2 with this message)."""


@dataclass(frozen=True)
class Setting:
    experiment: str
    env: str  # "Ant" / "HalfCheetah"
    strategy: str

    def __str__(self) -> str:
        return f"{self.experiment}/{self.env}/{self.strategy}"


@dataclass(frozen=True)
class Run:
    run_dir: str
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


def env_name(env: str) -> str:
    """'Ant', 'Ant-v5' -> 'Ant' (the name used in run dirs and tables)."""
    name = env[: -len("-v5")] if env.endswith("-v5") else env
    if name not in ENV_IDS:
        raise RunListError(f"unknown env {env!r}; valid: {', '.join(ENV_IDS)} (or {', '.join(ENV_IDS.values())})")
    return name


def script_method_name(path: str) -> str:
    """A discovered script's sweep name: the string its `def method_name` returns, when every return there is that
    one string literal (as in the template: `return "PPO"`); else the file's name in capitals
    (ppo_redo_continuous.py -> PPO_REDO). Read with ast, not imported: this module must not import torch."""
    try:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):  # unreadable, or being written: the file's name
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "method_name":
            returned = {n.value.value if isinstance(n.value, ast.Constant) and isinstance(n.value.value, str) else None
                        for n in ast.walk(node) if isinstance(n, ast.Return)}
            if len(returned) == 1 and None not in returned:
                return returned.pop()
    return os.path.basename(path)[: -len(SCRIPT_SUFFIX)].upper()


@functools.lru_cache(maxsize=None)  # summarize.py asks once per run directory
def discovered_methods(scripts_dir: str = REPO_ROOT) -> tuple[tuple[str, str], ...]:
    """(method, script) of every *_continuous.py in ``scripts_dir`` that METHODS does not name, by file name. A
    method name already taken (a copy of a listed method) gives way to the file's name in capitals."""
    listed = {script for script, _ in METHODS.values()}
    try:
        names = sorted(os.listdir(scripts_dir))
    except OSError:
        return ()
    found: dict[str, str] = {}
    for name in names:
        path = os.path.join(scripts_dir, name)
        if not name.endswith(SCRIPT_SUFFIX) or name in listed or not os.path.isfile(path):
            continue
        method = script_method_name(path)
        if method in METHODS or method in found:
            method = name[: -len(SCRIPT_SUFFIX)].upper()
        found.setdefault(method, name)
    return tuple(found.items())


def all_methods(scripts_dir: str = REPO_ROOT) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Sweep name -> (script, fixed flags): METHODS in the paper's order, then the discovered scripts (no flags)."""
    return {**METHODS, **{method: (script, ()) for method, script in discovered_methods(os.path.abspath(scripts_dir))}}


def method_for_script(script: str, variant: str | None = None, scripts_dir: str = REPO_ROOT) -> str | None:
    """Inverse of all_methods: ('eppo_continuous.py', 'cor') -> 'EPPO_cor'; None when unknown."""
    script = os.path.basename(script)
    if script == "eppo_continuous.py":
        name = f"EPPO_{variant}"
        return name if name in METHODS else None
    for method, (method_script, _) in all_methods(scripts_dir).items():
        if method_script == script:
            return method
    return None


def parse_seeds(spec: str) -> list[int]:
    """'1-15' -> [1..15]; '1,3,7-9' -> [1, 3, 7, 8, 9]. Order kept, duplicates removed."""
    seeds: list[int] = []
    for part in spec.split(","):
        start, dash, end = part.strip().partition("-")
        try:
            values = range(int(start), int(end) + 1) if dash else [int(start)]
        except ValueError:
            raise RunListError(f"invalid --seeds {spec!r}: use non-negative integers and ranges like 1-15 "
                               "or 1,2,5-7") from None
        if not values:
            raise RunListError(f"seed range {part.strip()!r} is empty (end < start)")
        for seed in values:
            if seed not in seeds:
                seeds.append(seed)
    return seeds


def read_kappa_table(path: str = PAPER_KAPPA_CSV) -> dict[Setting, dict[str, float]]:
    """paper_kappa.csv -> {Setting: {'EPPO_cor': k, 'EPPO_ind': k}} in file order."""
    table: dict[Setting, dict[str, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            setting = Setting(row["experiment"], row["env"], row["strategy"])
            table[setting] = {method: float(row[column]) for method, column in KAPPA_COLUMNS.items()}
    return table


def paper_settings() -> list[Setting]:
    """The paper's 14 settings (4 slippery + 10 paralysis), in its table order."""
    return list(read_kappa_table())


def _split_list(value: str | None) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()] if value else []


def select_settings(
    settings: str | None = None,
    experiments: str | None = None,
    envs: str | None = None,
    strategies: str | None = None,
    all_settings: bool = False,
) -> list[Setting]:
    """Settings from --settings 'exp/env/strategy,...', or the paper's settings filtered by
    --experiments/--envs/--strategies, or --all. Explicit --settings may name strategies outside
    the paper (the algorithm script validates them)."""
    if settings and (experiments or envs or strategies or all_settings):
        raise RunListError("--settings cannot be combined with --all/--experiments/--envs/--strategies")
    if settings:
        chosen = []
        for item in _split_list(settings):
            parts = item.split("/")
            if len(parts) != 3:
                raise RunListError(f"invalid setting {item!r}: use experiment/env/strategy, "
                                   "e.g. paralysis/HalfCheetah/back-one")
            experiment, env, strategy = parts
            if experiment not in EXPERIMENTS:
                raise RunListError(f"unknown experiment {experiment!r} in {item!r}; valid: {', '.join(EXPERIMENTS)}")
            chosen.append(Setting(experiment, env_name(env), strategy))
        return list(dict.fromkeys(chosen))
    if not (all_settings or experiments or envs or strategies):
        raise RunListError("no settings chosen: use --settings, --all, or --experiments/--envs/--strategies")
    pool = paper_settings()
    wanted_experiments = _split_list(experiments)
    for experiment in wanted_experiments:
        if experiment not in EXPERIMENTS:
            raise RunListError(f"unknown experiment {experiment!r}; valid: {', '.join(EXPERIMENTS)}")
    wanted_envs = [env_name(env) for env in _split_list(envs)]
    wanted_strategies = _split_list(strategies)
    known_strategies = sorted({s.strategy for s in pool})
    for strategy in wanted_strategies:
        if strategy not in known_strategies:
            raise RunListError(
                f"unknown strategy {strategy!r} among the paper's settings; valid: {', '.join(known_strategies)} "
                "(use --settings experiment/env/strategy for other strategies)"
            )
    chosen = [
        s
        for s in pool
        if (not wanted_experiments or s.experiment in wanted_experiments)
        and (not wanted_envs or s.env in wanted_envs)
        and (not wanted_strategies or s.strategy in wanted_strategies)
    ]
    if not chosen:
        raise RunListError("the --experiments/--envs/--strategies filters match none of the paper's settings")
    return chosen


def run_dir(root: str, setting: Setting, method: str, seed: int | str) -> str:
    return os.path.join(root, setting.experiment, setting.env, setting.strategy, method, f"seed{seed}")


def format_kappa(kappa: float) -> str:
    """0.1 -> '0.1', 0.25 -> '0.25', 1.0 -> '1' (shortest round-trip form, used in paths and flags)."""
    return repr(float(kappa)).removesuffix(".0")


def parse_kappa_grid(specs: list[str]) -> dict[str, list[float]]:
    """['EPPO_cor=0.01,0.1,0.25'] -> {'EPPO_cor': [0.01, 0.1, 0.25]}."""
    grid: dict[str, list[float]] = {}
    for spec in specs:
        method, sep, values = spec.partition("=")
        if not sep or method not in KAPPA_COLUMNS:
            raise RunListError(f"invalid --kappa-grid {spec!r}: use METHOD=K1,K2,... "
                               f"with METHOD in {', '.join(KAPPA_COLUMNS)}")
        try:
            grid[method] = [float(v) for v in _split_list(values)]
        except ValueError:
            raise RunListError(f"invalid kappa value in --kappa-grid {spec!r}") from None
        if not grid[method] or any(k < 0 for k in grid[method]):
            raise RunListError(f"--kappa-grid {spec!r} needs one or more non-negative values")
    return grid


def seed_packs(seeds: list[int], seeds_per_process: int) -> list[list[int]]:
    """Consecutive seeds (s, s + 1, ...) in packs of at most seeds_per_process, in the given order."""
    packs: list[list[int]] = []
    for seed in seeds:
        if packs and seed == packs[-1][-1] + 1 and len(packs[-1]) < seeds_per_process:
            packs[-1].append(seed)
        else:
            packs.append([seed])
    return packs


def build_runs(
    methods: list[str],
    settings: list[Setting],
    seeds: list[int],
    root: str,
    python: str = "python3",
    scripts_dir: str = REPO_ROOT,
    extra_args: tuple[str, ...] = (),
    kappa: float | None = None,
    kappa_grid: dict[str, list[float]] | None = None,
    kappa_table: dict[Setting, dict[str, float]] | None = None,
    seeds_per_process: int = 1,
    pending_only: bool = False,
) -> list[Run]:
    """Every (setting, method, seed[, kappa]) -> Run, or one Run per pack of up to ``seeds_per_process``
    consecutive seeds; ``pending_only`` leaves out finished seeds first. Loop order setting, method, seed so
    that a partially finished sweep has whole settings done first."""
    if seeds_per_process < 1:
        raise RunListError(f"--seeds-per-process must be a positive integer, got {seeds_per_process}")
    table = all_methods(scripts_dir)
    for method in methods:
        if method not in table:
            raise RunListError(f"unknown method {method!r}; valid: {', '.join(table)}")
    if not methods or not settings or not seeds:
        raise RunListError("empty run list: need at least one method, setting and seed")
    for flag in extra_args:
        if flag.split("=", 1)[0] in RESERVED_FLAGS:
            raise RunListError(f"extra flag {flag!r} is set by the sweep itself; "
                               f"reserved: {', '.join(RESERVED_FLAGS)} (use --kappa for kappa)")
    if kappa_grid:
        if kappa is not None:
            raise RunListError("--kappa and --kappa-grid are exclusive")
        if set(methods) - set(kappa_grid):
            raise RunListError(f"with --kappa-grid every method needs a grid; "
                               f"missing: {', '.join(sorted(set(methods) - set(kappa_grid)))}")
    if kappa_table is None:
        kappa_table = read_kappa_table()
    runs: list[Run] = []
    for setting in settings:
        for method in methods:
            script, fixed_flags = table[method]
            if kappa_grid:
                kappas: list[float | None] = list(kappa_grid[method])
            elif method in KAPPA_COLUMNS:
                if kappa is None and setting not in kappa_table:
                    raise RunListError(f"{method} needs --kappa for {setting}: it is not in scripts/paper_kappa.csv")
                kappas = [kappa if kappa is not None else kappa_table[setting][method]]
            else:
                kappas = [None]
            for k in kappas:
                base = os.path.join(root, f"kappa{format_kappa(k)}") if kappa_grid else root
                kappa_flags = ("--kappa", format_kappa(k)) if k is not None else ()
                todo = [seed for seed in seeds
                        if not (pending_only and is_finished(run_dir(base, setting, method, seed)))]
                for pack in seed_packs(todo, seeds_per_process):
                    directory = run_dir(base, setting, method, pack[0])
                    seed_flags = ("--seed", str(pack[0]), "--run-dir", directory) if len(pack) == 1 else (
                        "--seed", str(pack[0]), "--num-seeds", str(len(pack)),
                        "--run-dir", run_dir(base, setting, method, "{seed}"))  # fmt: skip
                    argv = (
                        python, os.path.join(scripts_dir, script),
                        "--env-id", ENV_IDS[setting.env], "--experiment", setting.experiment,
                        "--strategy", setting.strategy, *fixed_flags, *kappa_flags,
                        *seed_flags, *extra_args,
                    )  # fmt: skip
                    runs.append(Run(directory, argv))
    return runs


def is_finished(directory: str) -> bool:
    """CONTRACT: summary.json is written only when a run finished successfully."""
    return os.path.isfile(os.path.join(directory, "summary.json"))


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runlist.py",
        description="Run selection (shared by sweep.sh, slurm_sweep.sh, grid_search_kappa.sh). "
                    "Prints RUN_DIR<TAB>COMMAND lines.",
        epilog="Everything after `--` is passed to every run, e.g. -- --steps-per-task 100000 --track",
    )
    parser.add_argument("--methods", default="PPO", help=f"comma list of {', '.join(METHODS)}, or the method_name of "
                        "another *_continuous.py in --scripts-dir (default PPO)")
    parser.add_argument("--settings", help="comma list of experiment/env/strategy, e.g. paralysis/HalfCheetah/back-one")
    parser.add_argument("--all", dest="all_settings", action="store_true", help="the paper's 14 settings")
    parser.add_argument("--experiments", help=f"filter the paper's settings: comma list of {', '.join(EXPERIMENTS)}")
    parser.add_argument("--envs", help=f"filter the paper's settings: comma list of {', '.join(ENV_IDS)}")
    parser.add_argument("--strategies", help="filter the paper's settings: comma list of strategies")
    parser.add_argument("--seeds", default="1-15", help="e.g. 1-15 (default, the paper's) or 1,2,5-7")
    parser.add_argument("--seeds-per-process", type=int, default=1, metavar="K",
                        help="train up to K consecutive seeds of one method x setting in one process (--num-seeds)")
    parser.add_argument("--root", default="runs/sweep", help="root of the run directories (default runs/sweep)")
    parser.add_argument("--python", default="python3", help="interpreter for the runs (default python3)")
    parser.add_argument("--kappa", type=float, help="kappa for EPPO_cor/EPPO_ind (default: scripts/paper_kappa.csv)")
    parser.add_argument(
        "--kappa-grid", action="append", default=[], metavar="METHOD=K1,K2",
        help="run every kappa of the list (repeatable); dirs <root>/kappa<K>/...",
    )  # fmt: skip
    parser.add_argument("--scripts-dir", default=REPO_ROOT,
                        help="directory holding the algorithm scripts (default: repo root)")
    # Used by the shell scripts, not by people: hidden from --help.
    parser.add_argument("--pending", action="store_true", help=argparse.SUPPRESS)  # only runs without summary.json
    parser.add_argument("--show-root", action="store_true", help=argparse.SUPPRESS)  # print the absolute --root, exit
    # every run's --env-threads unless the extra flags set it (sweep.sh: its share of the cores; slurm: --cpus-per-task)
    parser.add_argument("--env-threads", type=int, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = make_parser().parse_args(argv)
    if args.env_threads is not None and not any(flag.split("=", 1)[0] == "--env-threads" for flag in extra):
        extra += ["--env-threads", str(args.env_threads)]
    if args.show_root:
        print(os.path.abspath(args.root))
        return 0
    try:
        if args.kappa is not None and args.kappa < 0:
            raise RunListError(f"--kappa must be >= 0, got {args.kappa}")
        runs = build_runs(
            methods=_split_list(args.methods),
            settings=select_settings(args.settings, args.experiments, args.envs, args.strategies, args.all_settings),
            seeds=parse_seeds(args.seeds),
            root=os.path.abspath(args.root),
            python=args.python,
            scripts_dir=os.path.abspath(args.scripts_dir),
            extra_args=tuple(extra),
            kappa=args.kappa,
            kappa_grid=parse_kappa_grid(args.kappa_grid),
            seeds_per_process=args.seeds_per_process,
            pending_only=args.pending,
        )
    except RunListError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for run in runs:
        if any(c in run.run_dir for c in "\t\n"):
            print(f"error: run dir {run.run_dir!r} contains a tab or newline", file=sys.stderr)
            return 2
        print(f"{run.run_dir}\t{run.command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
