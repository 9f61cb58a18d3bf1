"""Issue 46: a run directory's TensorBoard scalars that the analysis reads, as one small CSV to commit.

    python docs/eppo_critic/scalars.py RUN_DIR OUT.csv

Columns: tag, step, value; the tags under evidential/ and losses/, charts/action_std and charts/episodic_return.
The event files are megabytes per seed over a run; these rows are what docs/eppo_critic/analyze.py needs of them.
"""

import csv
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

KEPT_PREFIXES = ("evidential/", "losses/", "charts/action_std", "charts/episodic_return")


def main(argv: list) -> int:
    if len(argv) != 2:
        print("usage: scalars.py RUN_DIR OUT.csv", file=sys.stderr)
        return 2
    run_dir, out = argv
    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    accumulator.Reload()
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["tag", "step", "value"])
        for tag in sorted(accumulator.Tags()["scalars"]):
            if tag.startswith(KEPT_PREFIXES):
                for event in accumulator.Scalars(tag):
                    writer.writerow([tag, event.step, f"{event.value:.6g}"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
