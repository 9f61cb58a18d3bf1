"""Golden outputs of a tiny fixed-seed run of every algorithm script (no test_ prefix: not collected).

A fingerprint holds a run directory's evaluations.csv and plasticity.csv verbatim and the SHA-256 of every
tensor and array of its final checkpoint.pt (networks, optimizer moments, normalization statistics, generator
and environment states), so a test can tell that a change left a run's outputs bit for bit as they were.

The reference is a pinned commit, REFERENCE_COMMIT: tests/plumbing/test_all_scripts.py runs the same tiny runs with that
commit's scripts (exported by `git archive` into a temporary directory, the work tree untouched) and with the
work tree's, on the same machine, and compares the two fingerprints. The digests depend on the CPU's vector
instruction set (MKL's code path), so only a comparison on one machine is meaningful; the reference fingerprints
are cached per machine under .golden_cache/ (gitignored), so a machine pays for them once.

Without the reference commit in the clone's history (a shallow clone), the tests fall back to tests/golden/*.json,
recorded on one machine, and skip on a machine whose CPU capability differs, or fail when the CI environment
variable is set, where nothing skips (`git fetch --unshallow` fixes it, as .ci/run does; on
an AVX-512 CPU, ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 also reproduced the AVX2 files' digests):

    python tests/golden_outputs.py          # (re)record tests/golden/*.json from REFERENCE_COMMIT's scripts
    python tests/golden_outputs.py --commit C   # another reference commit's, into tests/golden/<C[:10]>/
    python tests/golden_outputs.py --update-keys env_states format   # re-record these checkpoint entries only,
                                            # after checking that everything else is still bit for bit the same
"""

import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_run import REPO_ROOT, run_script, two_seed_flags  # noqa: E402

# The commit whose outputs the work tree must reproduce bit for bit. A deliberate change of outputs moves it to
# the commit that made the change, with the reason in the commit message that moves it (CHANGELOG.md: the releases).
# 363535a (v0.1's last commit): the first commit with ppo_redo and ppo_snp, whose five older scripts are byte for byte
# those of ae9ef78, where they reproduced the previous reference aa9ecc08 bit for bit; now every script is guarded.
# d3270e2 (v0.2): the default moves to --log-std-init -1 without observation or reward normalization (nonormstd1,
# studies/2026-11-27_why_ppo_does_not_walk_on_ant); with V01_FLAGS every script still reproduces 363535a.
# 823e260 (v0.3): reward normalization is the default again (studies/2026-11-29_eppo_ind_gap_on_ant); with
# V02_FLAGS every script still reproduces d3270e2 bit for bit. v0.4 (71aed13) changed CB's HalfCheetah defaults only,
# whose effect the tiny runs never reach: no unit matures in them (tests/methods/test_cb.py holds v0.3's CB values
# apart).
REFERENCE_COMMIT = "823e260cb382a2e453ddd5717aa0e8961beef018"
# v0.1's defaults (before 2026-11-27), spelled out as flags, and v0.1's last commit: with these flags the work tree's
# scripts reproduce that commit's tiny runs bit for bit, wherever the defaults move
# (tests/plumbing/test_all_scripts.py::test_the_previous_defaults_are_one_set_of_flags_away; docs/ppo.md). The tiny
# flags set --minibatch-size themselves; the previous default was 256.
V01_COMMIT = "363535aba3a0acb026ace0c0a799070df1671c3e"
V01_FLAGS = ("--hidden-dim", "256", "--activation", "relu", "--layer-norm", "affine", "--init", "orthogonal",
             "--policy-head-gain", "0.01", "--log-std-init", "0.0", "--log-std-max", "None",
             "--learn-log-std", "--norm-obs", "--norm-reward", "--no-joint-optimizer", "--no-anneal-lr",
             "--include-cfrc-ext-in-observation")
# v0.2's defaults (2026-11-27 to 2026-11-29: raw rewards) and v0.2's commit: the one flag --no-norm-reward gives them
# back, and with it the work tree's scripts reproduce that commit's tiny runs bit for bit
# (studies/2026-11-29_eppo_ind_gap_on_ant: reward normalization became the default of every script).
V02_COMMIT = "d3270e2666667835da00fe1e6d0bc168967adca6"
V02_FLAGS = ("--no-norm-reward",)
# Every earlier set of defaults, (the last commit whose defaults they were, those defaults as flags), oldest first.
EARLIER_DEFAULTS = ((V01_COMMIT, V01_FLAGS), (V02_COMMIT, V02_FLAGS))
GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
CACHE_DIR = os.path.join(REPO_ROOT, ".golden_cache")
# The --num-seeds 2 runs are tiny_run.two_seed_flags' (with each method's EVENT_FLAGS, from its own test file: CB
# replaces units and ReDo recycles them within the tiny run only with them, so their code paths are part of the
# fingerprint). The --num-seeds 1 runs use the tiny flags alone (test_all_scripts' finished_run).
NUM_SEEDS = (1, 2)
# checkpoint entries that are not outputs of the computation (wall-clock timers, the command line with its run_dir,
# the file's layout: formats 4 and 5 store the numpy arrays as tensors, listed under numpy_arrays, with the same
# digests)
UNCOMPARED_KEYS = ("args", "timers", "format", "numpy_arrays")
# checkpoint entries newer than REFERENCE_COMMIT, compared once the reference has them: until then a run's entry is not
# "new" (last_eval_return: each seed's last evaluation return, the progress bar's, which format 4 read from its CSV)
NEWER_THAN_REFERENCE = ("last_eval_return",)
# checkpoint entries of REFERENCE_COMMIT that the scripts no longer write, not compared (initial_parameters: a copy of
# the initial weights that no method read; a method that needs its theta_0 keeps it as an agent entry)
DROPPED_SINCE_REFERENCE = ("initial_parameters",)
SCRIPT_SUFFIX = "_continuous.py"


def machine() -> dict:
    """What tests/golden/*.json record about the machine they were made on."""
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
            "torch": torch.__version__}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        return platform.processor()


def environment() -> dict:
    """Everything a cached reference fingerprint depends on besides the commit: the machine, the libraries, the
    variables that pick MKL's code path, and this harness (the tiny flags and the fingerprint's format)."""
    import gymnasium
    import mujoco

    harness = hashlib.sha256()
    for name in ("golden_outputs.py", "tiny_run.py"):
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "rb") as f:
            harness.update(f.read())
    # the two-seed runs' flags, with each method's EVENT_FLAGS, which live in its own test file, not in tiny_run.py
    scripts = sorted(name for name in os.listdir(REPO_ROOT) if name.endswith(SCRIPT_SUFFIX))
    harness.update(json.dumps({script: two_seed_flags(script) for script in scripts}).encode())
    return {**machine(), "cpu_model": cpu_model(), "python": platform.python_version(), "numpy": np.__version__,
            "mujoco": mujoco.__version__, "gymnasium": gymnasium.__version__,
            "MKL_ENABLE_INSTRUCTIONS": os.environ.get("MKL_ENABLE_INSTRUCTIONS", ""),
            "MKL_CBWR": os.environ.get("MKL_CBWR", ""), "harness": harness.hexdigest()[:16]}


def digest(value) -> object:
    """A JSON-able fingerprint of a checkpoint entry: SHA-256 of every tensor's and array's bytes (with dtype and
    shape), plain values as they are, containers entry by entry."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().contiguous().numpy()
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}:{hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}"
    if isinstance(value, dict):
        return {str(key): digest(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [digest(item) for item in value]
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    return value


def fingerprint(run_dir) -> dict:
    with open(os.path.join(run_dir, "evaluations.csv")) as f:
        evaluations = f.read()
    with open(os.path.join(run_dir, "plasticity.csv")) as f:
        plasticity = f.read()
    # full unpickling: the reference commit's checkpoints (format 3) hold numpy arrays; these files are the test's own
    checkpoint = torch.load(os.path.join(run_dir, "checkpoint.pt"), weights_only=False)
    return {"evaluations.csv": evaluations, "plasticity.csv": plasticity,
            "checkpoint": {key: digest(value) for key, value in sorted(checkpoint.items())
                           if key not in UNCOMPARED_KEYS}}


def _first_difference(actual, expected, path: str) -> str:
    """Where two digests first differ, e.g. "['actor']['0.weight']" (containers entry by entry)."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        if actual.keys() != expected.keys():
            return f"{path} has the keys {sorted(actual)}, expected {sorted(expected)}"
        return next(_first_difference(actual[k], expected[k], f"{path}[{k!r}]") for k in expected
                    if actual[k] != expected[k])
    if isinstance(actual, list) and isinstance(expected, list) and len(actual) == len(expected):
        return next(_first_difference(a, e, f"{path}[{i}]") for i, (a, e) in enumerate(zip(actual, expected)) if a != e)
    shown = f"{actual!r}, expected {expected!r}"
    return f"{path} is {shown}" if len(shown) < 100 else f"{path} changed"  # a digest says nothing to a reader


def differences(actual: dict, expected: dict) -> list:
    """Every way the fingerprints ``actual`` ({seed: fingerprint}) differ from ``expected``, one short line each;
    [] when they are bit for bit equal: both CSV files verbatim, every checkpoint entry (but UNCOMPARED_KEYS)."""
    if actual.keys() != expected.keys():
        return [f"seeds {sorted(actual)}, expected {sorted(expected)}"]
    found = []
    for seed, reference in expected.items():
        run = actual[seed]
        for name in ("evaluations.csv", "plasticity.csv"):
            if run[name] != reference[name]:
                got, want = run[name].splitlines(), reference[name].splitlines()
                line = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
                found.append(f"seed {seed}: {name} line {line + 1} is {got[line] if line < len(got) else None!r}, "
                             f"expected {want[line] if line < len(want) else None!r}")
        for key in sorted(set(run["checkpoint"]) | set(reference["checkpoint"])):
            if key not in run["checkpoint"]:
                if key not in DROPPED_SINCE_REFERENCE:
                    found.append(f"seed {seed}: checkpoint entry {key!r} is missing")
            elif key not in reference["checkpoint"]:
                if key not in NEWER_THAN_REFERENCE:
                    found.append(f"seed {seed}: checkpoint entry {key!r} is new")
            elif run["checkpoint"][key] != reference["checkpoint"][key]:
                found.append(f"seed {seed}: checkpoint" + _first_difference(run["checkpoint"][key],
                                                                            reference["checkpoint"][key], f"[{key!r}]"))
    return found


def without(fingerprints: dict, keys) -> dict:
    """``fingerprints`` without the checkpoint entries ``keys`` (those that --update-keys re-records)."""
    return {seed: {**run, "checkpoint": {k: v for k, v in run["checkpoint"].items() if k not in keys}}
            for seed, run in fingerprints.items()}


def golden_path(script: str, num_seeds: int, commit: str = REFERENCE_COMMIT) -> str:
    """tests/golden/<script>_k<n>.json for REFERENCE_COMMIT, tests/golden/<commit[:10]>/... for another commit."""
    directory = GOLDEN_DIR if commit == REFERENCE_COMMIT else os.path.join(GOLDEN_DIR, commit[:10])
    return os.path.join(directory, f"{script[: -len('.py')]}_k{num_seeds}.json")


def run_fingerprints(script: str, num_seeds: int, work_dir, repo_root=REPO_ROOT) -> dict:
    """Run the tiny configuration of ``script`` (from ``repo_root``) with seeds 1..num_seeds; each seed's
    fingerprint."""
    run_dir = os.path.join(str(work_dir), "seed{seed}")
    assert num_seeds in NUM_SEEDS, num_seeds
    extra = two_seed_flags(script) if num_seeds == 2 else []
    result = run_script(script, run_dir, *extra, repo_root=repo_root)
    if result.returncode != 0:
        raise RuntimeError(f"{script} (in {repo_root}) failed:\n{result.stderr[-3000:]}")
    return {str(seed): fingerprint(run_dir.replace("{seed}", str(seed))) for seed in range(1, num_seeds + 1)}


# ---- The reference commit: its scripts, its fingerprints on this machine (cached) ----

def _git(repo_root, *args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo_root), *args], capture_output=True, timeout=120)


def reference_available(repo_root=REPO_ROOT, commit: str = REFERENCE_COMMIT) -> bool:
    """Whether ``commit`` is in the clone's history (not in a shallow clone cut above it, nor in a copy without
    .git)."""
    try:
        return _git(repo_root, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def reference_scripts(repo_root=REPO_ROOT, commit: str = REFERENCE_COMMIT) -> list:
    """The top-level *_continuous.py files of ``commit`` (the scripts that have a reference)."""
    listing = _git(repo_root, "ls-tree", "--name-only", commit)
    if listing.returncode != 0:
        raise RuntimeError(f"git ls-tree {commit}: {listing.stderr.decode()[-500:]}")
    return sorted(name for name in listing.stdout.decode().splitlines() if name.endswith(SCRIPT_SUFFIX))


def recorded_scripts(commit: str = REFERENCE_COMMIT) -> list:
    """The scripts with recorded fingerprints in tests/golden (the fallback without the reference commit)."""
    directory = os.path.dirname(golden_path("x.py", 1, commit))
    return sorted(name[: -len("_k1.json")] + ".py" for name in os.listdir(directory) if name.endswith("_k1.json"))


def golden_scripts(repo_root=REPO_ROOT, commit: str = REFERENCE_COMMIT) -> list:
    """The scripts the golden tests compare: those of ``commit``, or, without it, the recorded ones."""
    return reference_scripts(repo_root, commit) if reference_available(repo_root, commit) else recorded_scripts(commit)


def export_reference(destination, repo_root=REPO_ROOT, commit: str = REFERENCE_COMMIT) -> None:
    """``commit``'s files into ``destination`` (git archive: the work tree and the index stay untouched)."""
    archive = _git(repo_root, "archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {commit}: {archive.stderr.decode()[-500:]}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        # filter="data" (Python >= 3.11.4) refuses members outside destination; the commit is ours anyway
        tar.extractall(destination, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))


def cache_path(script: str, num_seeds: int, commit: str = REFERENCE_COMMIT) -> str:
    """.golden_cache/<commit>/<cpu capability>-torch<version>-<hash of environment()>/<script>_k<n>.json"""
    env = environment()
    key = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:12]
    directory = f"{env['cpu_capability']}-torch{env['torch']}-{key}"
    return os.path.join(CACHE_DIR, commit, directory, f"{script[: -len('.py')]}_k{num_seeds}.json")


def write_json_atomically(path: str, content: dict) -> None:
    """Readers (another pytest-xdist worker) see the whole file or none: a temporary file, then os.replace."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(path), suffix=".tmp", delete=False) as f:
        json.dump(content, f, indent=1, sort_keys=True)
    os.replace(f.name, path)


def reference_fingerprints(script: str, num_seeds: int, repo_root=REPO_ROOT, commit: str = REFERENCE_COMMIT) -> dict:
    """The fingerprints of ``commit``'s ``script`` on this machine: from the cache, or run once (a few seconds)
    from an exported copy of the commit and cached."""
    path = cache_path(script, num_seeds, commit)
    try:
        with open(path) as f:
            return json.load(f)["seeds"]
    except (OSError, ValueError, KeyError):  # not cached yet (a cache file is never partial: written atomically)
        pass
    with tempfile.TemporaryDirectory(prefix="golden-reference-") as tmp:
        source = os.path.join(tmp, "source")
        export_reference(source, repo_root, commit)
        seeds = run_fingerprints(script, num_seeds, os.path.join(tmp, "run"), repo_root=source)
    write_json_atomically(path, {"commit": commit, "environment": environment(), "seeds": seeds})
    return seeds


class GoldenUnavailable(Exception):
    """No reference for this machine (the message says why and how to get one): the golden test skips, or fails
    in CI (tiny_run.cannot_run)."""


def expected_fingerprints(script: str, num_seeds: int, repo_root=REPO_ROOT, commit: str = REFERENCE_COMMIT) -> dict:
    """What the work tree's tiny run of ``script`` must reproduce on this machine: ``commit``'s fingerprints (by
    default REFERENCE_COMMIT's), or, when the clone lacks that commit, tests/golden's if they were recorded on a
    machine like this one."""
    if reference_available(repo_root, commit):
        return reference_fingerprints(script, num_seeds, repo_root, commit)
    with open(golden_path(script, num_seeds, commit)) as f:
        recorded = json.load(f)
    if recorded.get("commit", commit) != commit:
        raise GoldenUnavailable(f"{golden_path(script, num_seeds, commit)} was recorded at {recorded['commit'][:10]}, "
                                f"not at {commit[:10]}: re-record it (python tests/golden_outputs.py)")
    if recorded["machine"] != machine():
        raise GoldenUnavailable(f"the reference commit {commit[:10]} is not in this clone's history (run "
                                f"`git fetch --unshallow`), and tests/golden/ was recorded on {recorded['machine']}, "
                                f"this machine is {machine()}")
    return without(recorded["seeds"], UNCOMPARED_KEYS)  # recorded before an entry became uncompared (format)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="record a reference commit's golden outputs into tests/golden "
                                                 "(the fallback for clones without that commit)")
    parser.add_argument("scripts", nargs="*", help="only these scripts (default: every one of the reference commit)")
    parser.add_argument("--update-keys", nargs="+", default=None,
                        help="re-record only these checkpoint entries; every other output must be unchanged")
    parser.add_argument("--commit", default=REFERENCE_COMMIT,
                        help="the commit to record (default REFERENCE_COMMIT; an earlier defaults' commit's files "
                             "go to tests/golden/<commit[:10]>/ once the reference has moved past it)")
    options = parser.parse_args()
    if not reference_available(commit=options.commit):
        sys.exit(f"error: {options.commit} is not in this clone's history (git fetch --unshallow)")
    with tempfile.TemporaryDirectory(prefix="golden-reference-") as source:
        export_reference(source, commit=options.commit)
        for script in options.scripts or reference_scripts(commit=options.commit):
            for num_seeds in NUM_SEEDS:
                path = golden_path(script, num_seeds, options.commit)
                with tempfile.TemporaryDirectory() as work_dir:
                    seeds = run_fingerprints(script, num_seeds, work_dir, repo_root=source)
                if options.update_keys:
                    with open(path) as f:
                        recorded = json.load(f)["seeds"]
                    changed = differences(without(seeds, options.update_keys), without(recorded, options.update_keys))
                    if changed:
                        sys.exit(f"error: {script} --num-seeds {num_seeds}: " + "; ".join(changed))
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    json.dump({"commit": options.commit, "machine": machine(), "seeds": seeds}, f, indent=1,
                              sort_keys=True)
                print(f"recorded {path}")
