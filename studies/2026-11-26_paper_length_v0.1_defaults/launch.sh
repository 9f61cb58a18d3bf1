#!/usr/bin/env bash
# The paper's length (9 tasks x 500k steps, evaluation every 20k steps with 10 episodes) on paralysis
# back-one, PPO against EPPO_ind (the paper's kappa), with the scripts' defaults and nothing tuned.
#
#   bash studies/2026-11-26_paper_length_v0.1_defaults/launch.sh            # start (or resume) every unfinished run, in the background
#   bash studies/2026-11-26_paper_length_v0.1_defaults/launch.sh --status   # steps done per run, nothing started
#   bash studies/2026-11-26_paper_length_v0.1_defaults/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash studies/2026-11-26_paper_length_v0.1_defaults/launch.sh --collect  # copy each run's small outputs (config.json, evaluations.csv,
#                                               # plasticity.csv, summary.json) into studies/2026-11-26_paper_length_v0.1_defaults/outputs/ to commit
#   bash studies/2026-11-26_paper_length_v0.1_defaults/launch.sh --stash    # after --stop: each unfinished run's resume point (its checkpoint.pt
#                                               # and the logs up to it) into studies/2026-11-26_paper_length_v0.1_defaults/resume/ to commit
#
# PAPER_LENGTH_PIN, PAPER_LENGTH_ROOT and PAPER_LENGTH_OUTPUTS run the same study at another commit, in another
# root, collected elsewhere (studies/2026-11-27_paper_length_v0.2_defaults/launch.sh: at v0.2's defaults);
# PAPER_LENGTH_WORKERS=1 runs one process at a time (a core left to other work; the next launch resumes with two);
# PAPER_LENGTH_ANCHOR=0 leaves out phase 4 (studies/2026-11-29_paper_length_v0.3_defaults: at v0.3's defaults, where the anchor's invariant,
# task 0 = the unchanged Ant, does not depend on what changed).
# Every session that works on this study starts by running it. The runs live outside the work tree, in $ROOT
# (default /work/paper_length), and run the code of one pinned commit, cloned into $ROOT/code, so later commits
# on main never change a run half-way (config.json records the commit). Finished runs (summary.json) are left
# alone, unfinished ones resume bit-identically from their checkpoints (the same command), missing ones start.
# A session's machine may be fresh (no $ROOT): each launch first restores, through studies/2026-11-26_paper_length_v0.1_defaults/resume_store.py,
# the finished runs from the collected outputs and the unfinished ones from the committed resume points of the last
# session's --stash (when ahead of what $RUNS holds), so the study goes on where it stopped on any machine.
# Phases, in order, two processes at a time (one per core, `nice` so tests and benchmarks keep their priority):
#   1. Ant-v5 paralysis back-one,         PPO and EPPO_ind, seeds 1-5 (one --num-seeds 5 process each)
#   2. HalfCheetah-v5 paralysis back-one, PPO and EPPO_ind, seeds 1-8 (one --num-seeds 8 process each)
#   3. Ant-v5 paralysis back-one,         PPO and EPPO_ind, seeds 6-8 (one --num-seeds 3 process each)
#   4. the stationary anchor: PPO on the unchanged Ant-v5 (--experiment none), 2M steps, seeds 1-5 (processes of
#      seeds 1-3 and 4-5), in $RUNS/none/Ant/PPO/seed<k>; its first 500k steps are paralysis task 0 again
#      (the intact robot), so they must reproduce phase 1's PPO evaluations exactly (studies/2026-11-26_paper_length_v0.1_defaults/anchor.py)
set -u
PIN=${PAPER_LENGTH_PIN:-aa9ecc08c8a64409385db303fd4960a1caf12cb3}  # main when the runs began (2026-11-26)
ROOT=${PAPER_LENGTH_ROOT:-/work/paper_length}
CODE=$ROOT/code
RUNS=$ROOT/runs
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && git rev-parse --show-toplevel)
OUTPUTS=${PAPER_LENGTH_OUTPUTS:-$REPO/studies/2026-11-26_paper_length_v0.1_defaults/outputs}
STORE=${PAPER_LENGTH_STORE:-$(dirname "$OUTPUTS")/resume}  # the resume points of --stash, committed
RESUME_STORE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/resume_store.py
WORKERS=${PAPER_LENGTH_WORKERS:-2}  # processes at a time in phases 1-3 (one per core)
ANCHOR=${PAPER_LENGTH_ANCHOR:-1}  # 0: phases 1-3 only
PHASES=(
    "paralysis/Ant/back-one 1-5 5"
    "paralysis/HalfCheetah/back-one 1-8 8"
    "paralysis/Ant/back-one 6-8 3"
)
# PAPER_LENGTH_PHASES replaces them ("settings seeds per_process" per phase, phases separated by ';', settings a comma
# list) and PAPER_LENGTH_METHODS the methods (studies/2026-12-01_paper_length_all_seven_methods/launch.sh: the other five of the paper's)
[[ -n ${PAPER_LENGTH_PHASES:-} ]] && IFS=';' read -r -a PHASES <<<"$PAPER_LENGTH_PHASES"
METHODS=${PAPER_LENGTH_METHODS:-PPO,EPPO_ind}
ANCHOR_STEPS=2000000
ANCHOR_PROCESSES=("1 3" "4 2")  # first seed, number of seeds
RUNNING="^bash $ROOT/code/scripts/(sweep|run_one)\\.sh"  # a phase's sweep, or the anchor's run_one.sh

status() {
    python3 - "$RUNS" <<'PY'
import csv, glob, json, os, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--status | head` ends quietly
root = sys.argv[1]
print(f"{'run':<58} {'steps':>9} {'of':>9}  state")
for config in sorted(glob.glob(os.path.join(root, "**", "config.json"), recursive=True)):
    run_dir = os.path.dirname(config)
    with open(config) as f:
        total = json.load(f)["total_steps"]
    rows = list(csv.DictReader(open(os.path.join(run_dir, "evaluations.csv")))) if os.path.exists(os.path.join(run_dir, "evaluations.csv")) else []
    step = int(rows[-1]["global_step"]) if rows else 0
    state = "finished" if os.path.exists(os.path.join(run_dir, "summary.json")) else "unfinished"
    print(f"{os.path.relpath(run_dir, root):<58} {step:>9,} {total:>9,}  {state}")
PY
}

case ${1:-} in
    --status) status; exit 0 ;;
    --collect)
        dest=$OUTPUTS
        (cd "$RUNS" && find . -name config.json -printf '%h\n') | while read -r run; do
            mkdir -p "$dest/$run"
            for name in config.json evaluations.csv plasticity.csv summary.json; do
                [[ -f $RUNS/$run/$name ]] && cp "$RUNS/$run/$name" "$dest/$run/$name"
            done
        done
        echo "copied into $dest"; exit 0 ;;
    --stash)
        if pgrep -f "$RUNNING" >/dev/null; then
            echo "error: runs are still running; --stop them first (each writes a checkpoint), then --stash" >&2; exit 2
        fi
        python3 "$RESUME_STORE" stash "$RUNS" "$STORE" || exit
        echo "stashed into $STORE (commit it)"; exit 0 ;;
    --stop)
        # the sweep forwards the TERM to its runs; the anchor's run_one.sh (no sweep above it) gets its own
        pkill -TERM -f "^bash $ROOT/code/scripts/sweep.sh" || echo "no sweep running"
        pkill -TERM -f "^bash $ROOT/code/scripts/run_one.sh $RUNS/none/" || echo "no anchor running"
        exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--status | --stop | --collect | --stash]" >&2; exit 2 ;;
esac

if pgrep -f "$RUNNING" >/dev/null; then
    echo "already running:"; status; exit 0
fi
if [[ ! -d $CODE/.git ]]; then
    git clone --quiet --no-checkout "$REPO" "$CODE" && git -C "$CODE" checkout --quiet --detach "$PIN" || {
        echo "error: could not clone $REPO at $PIN into $CODE" >&2; exit 1; }
fi
[[ $(git -C "$CODE" rev-parse HEAD) == "$PIN" ]] || { echo "error: $CODE is not at $PIN" >&2; exit 1; }
mkdir -p "$RUNS"
echo "[launch $(date '+%F %T')] code $PIN, runs in $RUNS" >>"$ROOT/launch.log"
python3 "$RESUME_STORE" restore "$RUNS" "$STORE" "$OUTPUTS" | sed 's/^/[restore] /' | tee -a "$ROOT/launch.log"
((PIPESTATUS[0] == 0)) || { echo "error: could not restore from $STORE and $OUTPUTS" >&2; exit 1; }
(
    cd "$CODE" || exit 1
    for phase in "${PHASES[@]}"; do
        read -r setting seeds per_process <<<"$phase"
        nice -n 19 bash "$CODE/scripts/sweep.sh" --methods "$METHODS" --settings "$setting" --seeds "$seeds" \
            --seeds-per-process "$per_process" --root "$RUNS" --workers "$WORKERS" -- --torch-threads 1
        rc=$?
        ((rc == 0)) || { echo "[launch $(date '+%F %T')] phase $setting $seeds stopped (exit $rc)"; exit "$rc"; }
    done
    ((ANCHOR)) || { echo "[launch $(date '+%F %T')] phases 1-3 finished (the anchor left out)"; exit 0; }
    # phase 4: runlist.py knows only the paper's non-stationary settings, so the anchor's two processes are started
    # here, each through run_one.sh as the sweep does (skipped when finished, logs appended, TERM forwarded)
    pids=()
    for process in "${ANCHOR_PROCESSES[@]}"; do
        read -r first count <<<"$process"
        nice -n 19 bash "$CODE/scripts/run_one.sh" "$RUNS/none/Ant/PPO/seed$first" \
            "python3 $CODE/ppo_continuous.py --env-id Ant-v5 --experiment none --steps-per-task $ANCHOR_STEPS \
--seed $first --num-seeds $count --run-dir '$RUNS/none/Ant/PPO/seed{seed}' --torch-threads 1 --env-threads 1" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || { rc=$?; echo "[launch $(date '+%F %T')] anchor stopped (exit $rc)"; exit "$rc"; }
    done
    echo "[launch $(date '+%F %T')] all phases finished"
) >>"$ROOT/launch.log" 2>&1 </dev/null &
disown
echo "started in the background; log: $ROOT/launch.log"
