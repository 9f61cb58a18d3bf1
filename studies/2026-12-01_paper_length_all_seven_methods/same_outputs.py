"""Whether the work tree's scripts still produce what a pinned commit's produce, bit for bit, on this machine.

The committed PPO and EPPO_ind runs at the paper's length (studies/2026-11-29_paper_length_v0.3_defaults) ran the
code of 1fd797b; they stand beside this study's runs only if main still produces them. This compares, as the golden
tests compare commits (tests/golden_outputs.py: evaluations.csv and plasticity.csv verbatim, SHA-256 of every
checkpoint tensor), the commit's scripts (exported with git archive) and the work tree's, at their defaults, in two
configurations:

- the golden tests' tiny runs (HalfCheetah-v5 paralysis back-one, one seed and two seeds in one process);
- a short run of the study's own setting: Ant-v5 paralysis back-one, all 9 tasks of 2,048 steps, seeds 1-3 in one
  process (--num-seeds 3, as the runs), an evaluation of 2 episodes every 1,024 steps.

    python studies/2026-12-01_paper_length_all_seven_methods/same_outputs.py 1fd797bf2cbe66aa593899999acba88a4104a250 \
        ppo_continuous.py "eppo_continuous.py --variant ind"

Bit-identity holds on one machine and library build only (the digests depend on the CPU's vector code path).
"""

import os
import shlex
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests"))
import golden_outputs  # noqa: E402
from tiny_run import run_script, two_seed_flags  # noqa: E402

ANT_FLAGS = ("--env-id", "Ant-v5", "--steps-per-task", "2048", "--num-tasks", "9", "--eval-frequency", "1024",
             "--eval-episodes", "2", "--num-seeds", "3", "--no-cuda", "--torch-threads", "1", "--env-threads", "1")


def fingerprints(script: str, flags: list, extra: tuple, repo_root, work_dir, tiny: bool, seeds: int) -> dict:
    run_dir = os.path.join(work_dir, "seed{seed}")
    result = run_script(script, run_dir, *flags, *extra, tiny=tiny, repo_root=repo_root, timeout=1800)
    if result.returncode != 0:
        sys.exit(f"error: {script} in {repo_root} failed:\n{result.stderr[-2000:]}")
    return {str(s): golden_outputs.fingerprint(run_dir.replace("{seed}", str(s))) for s in range(1, seeds + 1)}


def main(argv: list) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    commit, commands = argv[0], argv[1:]
    if not golden_outputs.reference_available(commit=commit):
        print(f"error: {commit} is not in this clone's history (git fetch --unshallow)", file=sys.stderr)
        return 2
    print(f"machine: {golden_outputs.cpu_model()}, {golden_outputs.machine()}")
    differ = 0
    with tempfile.TemporaryDirectory(prefix="same-outputs-") as tmp:
        golden_outputs.export_reference(os.path.join(tmp, "pinned"), commit=commit)
        for command in commands:
            script, *flags = shlex.split(command)
            configurations = [("tiny, 1 seed", (), True, 1), ("tiny, 2 seeds", tuple(two_seed_flags(script)), True, 2),
                              ("Ant back-one, 9 x 2,048 steps, 3 seeds", ANT_FLAGS, False, 3)]
            for label, extra, tiny, seeds in configurations:
                runs = {name: fingerprints(script, flags, extra, root,
                                           os.path.join(tmp, f"{name}-{len(os.listdir(tmp))}"), tiny, seeds)
                        for name, root in (("pinned", os.path.join(tmp, "pinned")), ("work tree", REPO_ROOT))}
                changed = golden_outputs.differences(runs["work tree"], runs["pinned"])
                differ += bool(changed)
                print(f"{command} ({label}): "
                      + ("bit for bit equal" if not changed else "DIFFERENT: " + "; ".join(changed[:5])))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
