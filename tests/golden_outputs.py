"""Golden outputs of a tiny fixed-seed run of every algorithm script (no test_ prefix: not collected).

A fingerprint holds a run directory's evaluations.csv and plasticity.csv verbatim and the SHA-256 of every
tensor and array of its final checkpoint.pt (networks, optimizer moments, normalization statistics, generator
and environment states), so a test can tell that a refactoring left a run's outputs bit for bit as they were.

    python tests/golden_outputs.py          # (re)record tests/golden/*.json: only for a deliberate change
    python tests/golden_outputs.py --update-keys env_states format   # re-record these checkpoint entries only,
                                            # after checking that everything else is still bit for bit the same

The digests depend on the CPU's vector instruction set (MKL's code path): the files record the
torch CPU capability they were made with, and the test skips, saying so, on a machine with another.
"""

import hashlib
import json
import os
import platform
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_run import REPO_ROOT, run_script  # noqa: E402

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
SCRIPTS = ("ppo_continuous.py", "eppo_continuous.py", "pfo_continuous.py", "cb_continuous.py", "ppo_drnd_continuous.py")
# The --num-seeds 2 runs add these: CB replaces units within the tiny run only with them (the replacement code path
# is then part of the fingerprint). The --num-seeds 1 runs use the tiny flags alone (test_all_scripts' finished_run).
METHOD_FLAGS = {"cb_continuous.py": ["--maturity-threshold", "2", "--replacement-rate", "0.05"]}
NUM_SEEDS = (1, 2)
# checkpoint entries that are not outputs of the computation (wall-clock timers, the command line with its run_dir)
UNCOMPARED_KEYS = ("args", "timers")


def machine() -> dict:
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
            "torch": torch.__version__}


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
    checkpoint = torch.load(os.path.join(run_dir, "checkpoint.pt"), weights_only=False)
    return {"evaluations.csv": evaluations, "plasticity.csv": plasticity,
            "checkpoint": {key: digest(value) for key, value in sorted(checkpoint.items()) if key not in UNCOMPARED_KEYS}}


def golden_path(script: str, num_seeds: int) -> str:
    return os.path.join(GOLDEN_DIR, f"{script[: -len('.py')]}_k{num_seeds}.json")


def run_fingerprints(script: str, num_seeds: int, work_dir) -> dict:
    """Run the tiny configuration of ``script`` with seeds 1..num_seeds; each seed's fingerprint."""
    run_dir = os.path.join(str(work_dir), "seed{seed}")
    extra = ["--num-seeds", num_seeds, *(METHOD_FLAGS.get(script, []) if num_seeds > 1 else [])]
    result = run_script(script, run_dir, *extra)
    if result.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{result.stderr[-3000:]}")
    return {str(seed): fingerprint(run_dir.replace("{seed}", str(seed))) for seed in range(1, num_seeds + 1)}


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="record the golden outputs of the tiny runs")
    parser.add_argument("scripts", nargs="*", default=SCRIPTS, help="only these scripts (default: all five)")
    parser.add_argument("--update-keys", nargs="+", default=None,
                        help="re-record only these checkpoint entries; every other output must be unchanged")
    options = parser.parse_args()
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    for script in options.scripts:
        for num_seeds in NUM_SEEDS:
            with tempfile.TemporaryDirectory() as work_dir:
                seeds = run_fingerprints(script, num_seeds, work_dir)
            if options.update_keys:
                with open(golden_path(script, num_seeds)) as f:
                    golden = json.load(f)["seeds"]
                for seed, recorded in golden.items():
                    new = seeds[seed]
                    for name in ("evaluations.csv", "plasticity.csv"):
                        assert new[name] == recorded[name], f"{script} seed {seed}: {name} changed"
                    for key in set(recorded["checkpoint"]) | set(new["checkpoint"]):
                        if key not in options.update_keys:
                            assert new["checkpoint"].get(key) == recorded["checkpoint"].get(key), (script, seed, key)
            with open(golden_path(script, num_seeds), "w") as f:
                json.dump({"machine": machine(), "seeds": seeds}, f, indent=1, sort_keys=True)
            print(f"recorded {golden_path(script, num_seeds)}")
