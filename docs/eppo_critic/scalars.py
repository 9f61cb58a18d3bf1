"""Issue 46: a run directory's TensorBoard scalars that the analysis reads, as one small CSV to commit or stash.

    python docs/eppo_critic/scalars.py RUN_DIR OUT.csv.gz [--tags TAG,TAG,...]

Columns: tag, step, value (gzip-compressed CSV); the tags under evidential/ and losses/ and charts/action_std, one
point per update (the returns are in evaluations.csv); --tags keeps these tags alone (the paper-length runs of
item 4: a few tags over 4.5 M steps and 16 EPPO seeds, kilobytes each).
The event files are megabytes per seed over a run and are not carried from one machine to the next (resume/ holds
the checkpoint and the CSV logs); so `launch.sh --stash` stores this CSV beside each resume point, a launch on a
fresh machine puts it back as RUN_DIR/scalars.prev.csv.gz, and this script merges it with the run's own events (the
events win where both have a step: a resume purges the points logged after its checkpoint and logs them again).
"""

import csv
import glob
import gzip
import io
import os
import sys

KEPT_PREFIXES = ("evidential/", "losses/", "charts/action_std")
CARRIED = "scalars.prev.csv.gz"  # the scalars of the run's earlier machines (launch.sh restores it from resume/)


def read_csv(path: str) -> dict:
    """{(tag, step): value} of a scalars CSV (gzip-compressed)."""
    with gzip.open(path, "rt", newline="") as f:
        return {(row["tag"], int(row["step"])): float(row["value"]) for row in csv.DictReader(f)}


def collect(run_dir: str, tags=None) -> dict:
    """{(tag, step): value}: the run's TensorBoard scalars under KEPT_PREFIXES (or the ``tags`` alone), over those
    carried in CARRIED."""
    def kept(tag: str) -> bool:
        return tag in tags if tags else tag.startswith(KEPT_PREFIXES)

    found = read_csv(os.path.join(run_dir, CARRIED)) if os.path.exists(os.path.join(run_dir, CARRIED)) else {}
    if glob.glob(os.path.join(run_dir, "events.out.tfevents.*")):
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            if kept(tag):
                found.update({(tag, event.step): event.value for event in accumulator.Scalars(tag)})
    return {key: value for key, value in found.items() if kept(key[0])}


def write(scalars: dict, out: str) -> None:
    with gzip.GzipFile(out, "wb", mtime=0) as raw, io.TextIOWrapper(raw, newline="") as f:  # mtime 0: same bytes
        writer = csv.writer(f)
        writer.writerow(["tag", "step", "value"])
        writer.writerows([tag, step, f"{value:.6g}"] for (tag, step), value in sorted(scalars.items()))


def main(argv: list) -> int:
    tags = None
    if len(argv) == 4 and argv[2] == "--tags" and argv[3]:
        tags = set(argv[3].split(","))
    elif len(argv) != 2:
        print("usage: scalars.py RUN_DIR OUT.csv.gz [--tags TAG,TAG,...]", file=sys.stderr)
        return 2
    write(collect(argv[0], tags), argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
