"""Copy the small outputs of this study's runs into studies/2026-11-27_why_ppo_does_not_walk_on_ant/outputs/
(to commit); the runs live outside the work tree. Our runs (screen.sh): config.json, evaluations.csv, summary.json
(when finished) and training.csv, which this script writes from the run's TensorBoard events; SB3's
(sb3/run_all.sh): its config.json, evaluations.csv and training.csv as they are.

    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/collect.py [--root /work/ant_walk] \\
        [--sb3-root /work/ant_walk_sb3]
    # the HalfCheetah check (screen.sh with SCREEN_ENV=HalfCheetah-v5):
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/collect.py --root /work/ant_walk_halfcheetah \\
        --outputs studies/2026-11-27_why_ppo_does_not_walk_on_ant/halfcheetah_outputs --sb3-root ""

training.csv has one row per evaluation step, the same columns for both: the policy's std (mean over action
dimensions; ours: the last charts/action_std logged at or before the step), and the mean length and return of the
training episodes that ended since the previous evaluation (empty when none did).
"""

import argparse
import csv
import glob
import os
import shutil

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUTS = os.path.join(HERE, "outputs")
TRAINING_COLUMNS = ["global_step", "policy_std_mean", "train_episode_length_mean", "train_episode_return_mean"]


def evaluation_steps(run_dir: str) -> list:
    with open(os.path.join(run_dir, "evaluations.csv"), newline="") as f:
        return [int(row["global_step"]) for row in csv.DictReader(f)]


def training_rows(run_dir: str) -> list:
    """The rows of training.csv from the run's TensorBoard events (the last event file's scalars win on a step
    logged twice, as a resumed run logs again the steps after its checkpoint)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = {}
    for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        accumulator = EventAccumulator(path, size_guidance={"scalars": 0})
        accumulator.Reload()
        for tag in ("charts/action_std", "charts/episodic_length", "charts/episodic_return"):
            if tag in accumulator.Tags()["scalars"]:
                for event in accumulator.Scalars(tag):
                    scalars.setdefault(tag, {})[(event.step, event.wall_time)] = event.value
    series = {tag: sorted(values.items()) for tag, values in scalars.items()}
    rows, previous = [], -1
    for step in evaluation_steps(run_dir):
        stds = [value for (s, _), value in series.get("charts/action_std", []) if s <= step]
        lengths = [value for (s, _), value in series.get("charts/episodic_length", []) if previous < s <= step]
        returns = [value for (s, _), value in series.get("charts/episodic_return", []) if previous < s <= step]
        rows.append([step, stds[-1] if stds else "", np.mean(lengths) if lengths else "",
                     np.mean(returns) if returns else ""])
        previous = step
    return rows


def collect_ours(root: str, outputs: str = OUTPUTS) -> None:
    for config in sorted(glob.glob(os.path.join(root, "runs", "*", "*", "seed*", "config.json"))):
        run_dir = os.path.dirname(config)
        destination = os.path.join(outputs, os.path.relpath(run_dir, os.path.join(root, "runs")))
        os.makedirs(destination, exist_ok=True)
        for name in ("config.json", "evaluations.csv", "summary.json"):
            if os.path.exists(os.path.join(run_dir, name)):
                shutil.copy(os.path.join(run_dir, name), destination)
        with open(os.path.join(destination, "training.csv"), "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(TRAINING_COLUMNS)
            writer.writerows(training_rows(run_dir))
        print(f"collected {destination}")


def collect_sb3(root: str) -> None:
    for config in sorted(glob.glob(os.path.join(root, "sb3_*", "seed*", "config.json"))):
        run_dir = os.path.dirname(config)
        destination = os.path.join(OUTPUTS, "sb3", os.path.relpath(run_dir, root))
        os.makedirs(destination, exist_ok=True)
        for name in ("config.json", "evaluations.csv", "training.csv"):
            shutil.copy(os.path.join(run_dir, name), destination)
        print(f"collected {destination}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.environ.get("ANT_WALK_ROOT", "/work/ant_walk"))
    parser.add_argument("--outputs", default=OUTPUTS,
                        help="where our runs' outputs go "
                             "(default studies/2026-11-27_why_ppo_does_not_walk_on_ant/outputs)")
    parser.add_argument("--sb3-root", default="/work/ant_walk_sb3", help='SB3\'s runs ("": none)')
    args = parser.parse_args()
    collect_ours(args.root, args.outputs)
    if args.sb3_root:
        collect_sb3(args.sb3_root)


if __name__ == "__main__":
    main()
