"""Summarize the PPO_ReDo screen (docs/baselines.md, "PPO_ReDo (screen)"): per environment and method, each seed's
AULC (mean of evaluations.csv's return_mean over all evaluations) and final return, their mean +- standard error
over seeds, the dormant-unit percentage (plasticity.csv) at the task ends, and the units ReDo recycled (TensorBoard
redo/ tags).

    python studies/2026-11-26_redo_screen/analyze.py /tmp/redo_screen
"""

import csv
import glob
import os
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def mean_se(values):
    values = np.asarray(values, float)
    return values.mean(), values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")


def redo_scalars(seed_dir):
    events = EventAccumulator(seed_dir, size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    return {tag: [e.value for e in events.Scalars(tag)] for tag in tags if tag.startswith("redo/")}


def main(root):
    for env in ("HalfCheetah", "Ant"):
        for method in ("PPO", "PPO_ReDo"):
            seed_dirs = sorted(glob.glob(os.path.join(root, env, method, "seed*")))
            if not seed_dirs:
                continue
            aulc, final, dormant = [], [], {"actor": [], "critic": []}
            print(f"\n{env} {method}")
            for seed_dir in seed_dirs:
                if not os.path.exists(os.path.join(seed_dir, "summary.json")):
                    print(f"  {os.path.basename(seed_dir)}: not finished")
                    continue
                evaluations = rows(os.path.join(seed_dir, "evaluations.csv"))
                returns = [float(r["return_mean"]) for r in evaluations]
                aulc.append(np.mean(returns))
                final.append(returns[-1])
                task_ends = [r for r in rows(os.path.join(seed_dir, "plasticity.csv")) if int(r["global_step"]) > 0]
                line = f"  {os.path.basename(seed_dir)}: AULC {aulc[-1]:.0f}, final {final[-1]:.0f}"
                for network in ("actor", "critic"):
                    values = [float(r["dormant_percent"]) for r in task_ends if r["network"] == network]
                    dormant[network].append(values)
                    line += f"; {network} dormant % at task ends {' '.join(f'{v:.1f}' for v in values)}"
                if method == "PPO_ReDo":
                    scalars = redo_scalars(seed_dir)
                    for network in ("actor", "critic"):
                        before = scalars[f"redo/{network}_dormant_percent_before"]
                        line += (f"; {network} recycled {sum(scalars[f'redo/{network}_recycled_units']):.0f} units in "
                                 f"{len(before)} recycles (tau-dormant % before {np.mean(before):.2f}, after "
                                 f"{np.mean(scalars[f'redo/{network}_dormant_percent_after']):.2f})")
                print(line)
            if aulc:
                print("  mean +- SE: AULC %.0f +- %.0f, final %.0f +- %.0f" % (*mean_se(aulc), *mean_se(final)))
                for network in ("actor", "critic"):
                    per_task = np.mean(dormant[network], axis=0)
                    print(f"  {network} dormant % at the task ends (mean over seeds): "
                          + " ".join(f"{v:.1f}" for v in per_task) + f"; mean {per_task.mean():.1f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/redo_screen")
