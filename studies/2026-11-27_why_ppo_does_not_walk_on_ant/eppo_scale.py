"""The EPPO scale check: what reward normalization on or off does to EPPO's evidential critic, from two runs'
TensorBoard events (EPPO_ind on the stationary Ant-v5 at the candidate default's flags, one with --norm-reward):

    bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/eppo_scale.sh  # the two runs (≈ 10 min, one core)
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/eppo_scale.py \\
        /work/eppo_scale/no-norm-reward /work/eppo_scale/norm-reward \\
        > studies/2026-11-27_why_ppo_does_not_walk_on_ant/eppo_scale.md

Per run: the mean over the updates in the last half of the run of each evidential/ and losses/ tag below.
"""

import glob
import os
import sys

import numpy as np

TAGS = ("evidential/omega", "evidential/beta", "evidential/nu", "evidential/alpha", "evidential/aleatoric_variance",
        "evidential/epistemic_variance", "evidential/student_t_scale", "evidential/targets_outside_2_scales",
        "evidential/advantage_std", "evidential/ucb_bonus", "evidential/zeta", "losses/nll", "losses/hyperprior",
        "losses/explained_variance")


def tag_means(run_dir: str) -> dict:
    """{tag: mean over the logged updates in the second half of the run's steps}."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    values = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        accumulator = EventAccumulator(path, size_guidance={"scalars": 0})
        accumulator.Reload()
        for tag in TAGS:
            if tag in accumulator.Tags()["scalars"]:
                values.setdefault(tag, {}).update({event.step: event.value for event in accumulator.Scalars(tag)})
    last = max(step for series in values.values() for step in series)
    return {tag: float(np.mean([v for s, v in series.items() if s > last / 2])) for tag, series in values.items()}


def main(run_dirs: list) -> None:
    means = {os.path.basename(os.path.normpath(d)): tag_means(d) for d in run_dirs}
    names = list(means)
    print("| tag (mean over the updates of the run's second half) | " + " | ".join(f"`{n}`" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for tag in TAGS:
        print(f"| {tag} | " + " | ".join(f"{means[n].get(tag, float('nan')):.4g}" for n in names) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
