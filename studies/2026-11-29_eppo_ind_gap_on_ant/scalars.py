"""A run directory's TensorBoard scalars that the analysis reads, as one small CSV to commit or stash.

    python studies/2026-11-29_eppo_ind_gap_on_ant/scalars.py RUN_DIR OUT.csv.gz [--tags TAG,TAG,...]
    # each run: OUTPUTS/<run>/
    python studies/2026-11-29_eppo_ind_gap_on_ant/scalars.py --collect RUNS OUTPUTS [--tags ...] [--runs GLOB]
    # each resume point in STORE
    python studies/2026-11-29_eppo_ind_gap_on_ant/scalars.py --stash RUNS STORE [--tags ...] [--runs GLOB]
    # the stashed CSVs back
    python studies/2026-11-29_eppo_ind_gap_on_ant/scalars.py --restore RUNS STORE

Columns: tag, step, value (gzip-compressed CSV); the tags under evidential/ and losses/ and charts/action_std, one
point per update (the returns are in evaluations.csv); --tags keeps these tags alone (the paper-length runs of
item 4: a few tags over 4.5 M steps and 16 EPPO seeds, kilobytes each).
The event files are megabytes per seed over a run and are not carried from one machine to the next (resume/ holds
the checkpoint and the CSV logs); so `launch.sh --stash` stores this CSV beside each resume point, a launch on a
fresh machine puts it back as RUN_DIR/scalars.prev.csv.gz, and this script merges it with the run's own events (the
events win where both have a step: a resume purges the points logged after its checkpoint and logs them again).
The three store modes do this for a study's launcher (studies/2026-11-29_eppo_ind_gap_on_ant/launch.sh,
studies/2026-11-29_paper_length_v0.3_defaults/launch.sh), beside
studies/2026-11-26_paper_length_v0.1_defaults/resume_store.py's checkpoints: --collect writes
OUTPUTS/<run>/scalars.csv.gz for each run directory (config.json) under RUNS, --stash STORE/<run>/scalars.csv.gz
beside each resume point (checkpoint.pt) in STORE; --runs keeps the runs whose path relative to RUNS matches a glob
('*/EPPO_ind/seed*'). --restore copies each STORE/<run>/scalars.csv.gz over RUNS/<run>/scalars.prev.csv.gz where
RUNS/<run> exists: the store's CSV was written from the run's own scalars.prev.csv.gz and events, so it holds all the
older one does.
"""

import argparse
import csv
import fnmatch
import glob
import gzip
import io
import os
import shutil
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
        import logging

        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        # a resumed run's events restart at its checkpoint's step: the accumulator purges the older points after it,
        # as it should, and warns of it once per run
        logging.getLogger("tensorboard").setLevel(logging.ERROR)

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


def run_directories(root: str, marker: str, pattern=None) -> list:
    """The directories under ``root`` that hold the file ``marker``, relative to it, sorted; with ``pattern``, those
    whose relative path matches that glob alone."""
    found = [os.path.relpath(directory, root) for directory, _, files in os.walk(root) if marker in files]
    return sorted(run for run in found if pattern is None or fnmatch.fnmatchcase(run, pattern))


def collect_runs(runs: str, outputs: str, tags=None, pattern=None) -> list:
    """--collect: OUTPUTS/<run>/scalars.csv.gz for each run directory under ``runs``. Returns the runs written."""
    written = run_directories(runs, "config.json", pattern)
    for run in written:
        os.makedirs(os.path.join(outputs, run), exist_ok=True)
        write(collect(os.path.join(runs, run), tags), os.path.join(outputs, run, "scalars.csv.gz"))
    return written


def stash(runs: str, store: str, tags=None, pattern=None) -> list:
    """--stash: STORE/<run>/scalars.csv.gz beside each resume point (checkpoint.pt) in ``store``, from the run's
    directory under ``runs``. Returns the runs written."""
    written = run_directories(store, "checkpoint.pt", pattern)
    for run in written:
        write(collect(os.path.join(runs, run), tags), os.path.join(store, run, "scalars.csv.gz"))
    return written


def restore(runs: str, store: str) -> list:
    """--restore: each STORE/<run>/scalars.csv.gz over RUNS/<run>/scalars.prev.csv.gz, where RUNS/<run> exists (a run
    the launch restored or this machine holds). Returns the runs copied."""
    copied = [run for run in run_directories(store, "scalars.csv.gz") if os.path.isdir(os.path.join(runs, run))]
    for run in copied:
        shutil.copyfile(os.path.join(store, run, "scalars.csv.gz"), os.path.join(runs, run, CARRIED))
    return copied


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    modes = parser.add_mutually_exclusive_group()
    for mode in ("collect", "stash", "restore"):
        modes.add_argument(f"--{mode}", dest="mode", action="store_const", const=mode,
                           help=f"the positional arguments are RUNS and {'STORE' if mode != 'collect' else 'OUTPUTS'}")
    parser.add_argument("source", help="RUN_DIR, or RUNS with a mode")
    parser.add_argument("destination", help="OUT.csv.gz, or OUTPUTS / STORE with a mode")
    parser.add_argument("--tags", type=lambda text: set(filter(None, text.split(","))),
                        help="keep these tags alone (comma-separated)")
    parser.add_argument("--runs", help="with --collect or --stash: the runs whose relative path matches this glob")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.tags is not None and not args.tags:
        print("error: --tags needs at least one tag, e.g. --tags evidential/nu_min", file=sys.stderr)
        return 2
    for flag, value in (("--tags", args.tags), ("--runs", args.runs)):
        if value is not None and args.mode == "restore":
            print(f"error: {flag} does not go with --restore (it copies each stashed CSV as it is)", file=sys.stderr)
            return 2
    if args.runs is not None and args.mode is None:
        print("error: --runs goes with --collect or --stash", file=sys.stderr)
        return 2
    if args.mode is None:
        write(collect(args.source, args.tags), args.destination)
    elif args.mode == "collect":
        print(f"scalars of {len(collect_runs(args.source, args.destination, args.tags, args.runs))} runs collected")
    elif args.mode == "stash":
        print(f"scalars of {len(stash(args.source, args.destination, args.tags, args.runs))} resume points stashed")
    else:
        print(f"scalars of {len(restore(args.source, args.destination))} runs restored")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
