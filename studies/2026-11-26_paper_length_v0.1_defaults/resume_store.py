"""Carry a study's runs from one machine to the next through the repository: a store of resume points to commit.

The study's runs live outside the work tree (studies/2026-11-26_paper_length_v0.1_defaults/launch.sh) and take many
sessions. When a session's machine is fresh (its /work holds only the clone of main), the runs' directories of the
last machine are gone, and with them their checkpoints: every run would start again at step 0. So at the end of a
session, after `launch.sh --stop`, `launch.sh --stash` copies each unfinished run's resume point into a store in the
repository, to commit; and every launch first restores what the machine lacks:

    python studies/2026-11-26_paper_length_v0.1_defaults/resume_store.py stash RUNS STORE  # launch.sh --stash
    # the first thing every launch does:
    python studies/2026-11-26_paper_length_v0.1_defaults/resume_store.py restore RUNS STORE OUTPUTS

A resume point is what the scripts resume from (restore_or_reset): the newest checkpoint.pt, beside the
evaluations.csv and plasticity.csv logged up to it (the resumed run drops rows logged after the checkpoint and logs
them again identically) and config.json. checkpoint.prev.pt is left out (a stopped run's newest checkpoint is whole)
and so are the TensorBoard event files (megabytes per seed over a run; evaluations.csv and plasticity.csv hold what
the tables read): on a fresh machine a restored run's TensorBoard curves begin at its checkpoint.

Restore copies a stored resume point into RUNS only when it is ahead of what the run's directory holds (no
checkpoint, or one at an earlier step), so it never moves a run back; and it copies each finished run of OUTPUTS
(the collected config.json, evaluations.csv, plasticity.csv, summary.json) into a run directory that has no
summary.json, so the sweep skips it as finished instead of training it again. Stash drops the store's entry of a
run that has finished (its outputs are collected by `launch.sh --collect`).
"""

import argparse
import json
import os
import shutil
import sys

RESUME_FILES = ("checkpoint.pt", "config.json", "evaluations.csv", "plasticity.csv")
FINISHED_FILES = ("config.json", "evaluations.csv", "plasticity.csv", "summary.json")


def run_directories(root: str) -> list:
    """The run directories under ``root`` (those holding a config.json), relative to it, sorted."""
    found = []
    for directory, _, files in os.walk(root):
        if "config.json" in files:
            found.append(os.path.relpath(directory, root))
    return sorted(found)


def checkpoint_step_of_file(path: str):
    """The step of one checkpoint file, read as the scripts read it (tensors and plain values only), or None when it
    is missing or cannot be read (cut short, another format): the scripts would skip it too."""
    import torch

    try:
        return int(torch.load(path, map_location="cpu", weights_only=True)["global_step"])
    except Exception:
        return None


def readable_checkpoints(run_dir: str) -> dict:
    """{step: path} of the checkpoints of ``run_dir`` that the scripts can read (checkpoint.pt, checkpoint.prev.pt)."""
    found = {}
    for path in (os.path.join(run_dir, name) for name in ("checkpoint.prev.pt", "checkpoint.pt")):
        step = checkpoint_step_of_file(path)
        if step is not None:
            found[step] = path
    return found


def newest_step(run_dir: str):
    """The step of the newest readable checkpoint of ``run_dir``, or None when it has none."""
    return max(readable_checkpoints(run_dir), default=None)


def processes(runs: str, run_list: list) -> list:
    """``run_list`` grouped by the process that trains them (one --num-seeds K process writes K run directories):
    the directories beside each other with the same --run-dir pattern and --num-seeds, in order."""
    groups = {}
    for run in run_list:
        with open(os.path.join(runs, run, "config.json")) as f:
            args = json.load(f)["args"]
        groups.setdefault((os.path.dirname(run), args["run_dir"], args["num_seeds"]), []).append(run)
    return list(groups.values())


def copy_files(source: str, destination: str, names: tuple) -> None:
    """Copy the files ``names`` that ``source`` holds into ``destination`` (made when missing)."""
    os.makedirs(destination, exist_ok=True)
    for name in names:
        if os.path.exists(os.path.join(source, name)):
            shutil.copy2(os.path.join(source, name), os.path.join(destination, name))


def stash(runs: str, store: str) -> list:
    """Copy each unfinished run's resume point into ``store`` (replacing the stored one); drop the store's entry of
    each finished run. The seeds of one process are stashed at one step: the newest that all of them hold (as the
    scripts resume: a process stopped while writing its seeds' checkpoints leaves them a step apart). Returns one
    line per run, as printed."""
    lines, unfinished = [], []
    for run in run_directories(runs) if os.path.isdir(runs) else []:
        if not os.path.exists(os.path.join(runs, run, "summary.json")):
            unfinished.append(run)
        elif os.path.isdir(os.path.join(store, run)):
            shutil.rmtree(os.path.join(store, run))
            lines.append(f"{run}: finished, its resume point dropped from the store")
    for process in processes(runs, unfinished):
        by_step = [readable_checkpoints(os.path.join(runs, run)) for run in process]
        common = set.intersection(*(set(steps) for steps in by_step))
        if not common:
            why = "no checkpoint yet" if not all(by_step) else "its seeds share no checkpoint step"
            lines += [f"{run}: {why}, nothing stashed" for run in process]
            continue
        step = max(common)
        for run, checkpoints in zip(process, by_step):
            stored = os.path.join(store, run)
            if newest_step(stored) == step:
                lines.append(f"{run}: checkpoint at {step:,} already in the store")
                continue
            if os.path.isdir(stored):
                shutil.rmtree(stored)
            copy_files(os.path.join(runs, run), stored, RESUME_FILES[1:])
            shutil.copy2(checkpoints[step], os.path.join(stored, "checkpoint.pt"))  # checkpoint.prev.pt if behind
            lines.append(f"{run}: checkpoint at {step:,} stashed")
    return lines


def restore(runs: str, store: str, outputs: str) -> list:
    """Copy into ``runs`` each finished run of ``outputs`` it lacks and the resume points of each process in ``store``
    that are ahead of the step the process would resume from in ``runs``. Returns one line per run copied."""
    lines = []
    for run in run_directories(outputs) if os.path.isdir(outputs) else []:
        source, run_dir = os.path.join(outputs, run), os.path.join(runs, run)
        if os.path.exists(os.path.join(source, "summary.json")) and not os.path.exists(
                os.path.join(run_dir, "summary.json")):
            copy_files(source, run_dir, FINISHED_FILES)
            lines.append(f"{run}: finished, its outputs restored from {outputs}")
    stored_runs = [run for run in (run_directories(store) if os.path.isdir(store) else [])
                   if not os.path.exists(os.path.join(runs, run, "summary.json"))]
    for process in processes(store, stored_runs):
        # the step the process would resume from now (as the scripts choose it: the newest all its seeds hold)
        own = [set(readable_checkpoints(os.path.join(runs, run))) for run in process]
        own_step = max(set.intersection(*own), default=None)
        stored_step = newest_step(os.path.join(store, process[0]))
        if stored_step is None or (own_step is not None and own_step >= stored_step):
            continue
        for run in process:
            run_dir = os.path.join(runs, run)
            if os.path.exists(os.path.join(run_dir, "checkpoint.prev.pt")):  # of the directory's own, older attempt
                os.remove(os.path.join(run_dir, "checkpoint.prev.pt"))
            copy_files(os.path.join(store, run), run_dir, RESUME_FILES)
            lines.append(f"{run}: resumes from the stored checkpoint at {stored_step:,}"
                         f"{'' if own_step is None else f' (its own was at {own_step:,})'}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    stash_parser = commands.add_parser("stash", help="copy the unfinished runs' resume points into the store")
    stash_parser.add_argument("runs")
    stash_parser.add_argument("store")
    restore_parser = commands.add_parser("restore", help="copy into RUNS what it lacks (finished runs, resume points)")
    restore_parser.add_argument("runs")
    restore_parser.add_argument("store")
    restore_parser.add_argument("outputs")
    args = parser.parse_args(argv)
    if args.command == "stash":
        if not os.path.isdir(args.runs):
            print(f"error: no run directories: {args.runs} does not exist", file=sys.stderr)
            return 2
        lines = stash(args.runs, args.store)
    else:
        lines = restore(args.runs, args.store, args.outputs)
    for line in lines or ["nothing to copy"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
