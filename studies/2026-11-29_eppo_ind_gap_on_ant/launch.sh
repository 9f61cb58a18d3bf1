#!/usr/bin/env bash
# The walk from PPO to EPPO_ind on Ant-v5 paralysis back-one, the paper's protocol cut to its first 5
# tasks (2.5 M steps, torque 1 -> 0), on the grid-search seeds 1001-1003 (never the reporting seeds), one
# process per configuration with --num-seeds 3, two processes at a time, `nice`.
#
#   bash studies/2026-11-29_eppo_ind_gap_on_ant/launch.sh            # start (or resume) every unfinished run, in the background
#   bash studies/2026-11-29_eppo_ind_gap_on_ant/launch.sh --status   # steps done per run
#   bash studies/2026-11-29_eppo_ind_gap_on_ant/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash studies/2026-11-29_eppo_ind_gap_on_ant/launch.sh --collect  # small outputs (+ the evidential/ scalars) into studies/2026-11-29_eppo_ind_gap_on_ant/outputs/
#   bash studies/2026-11-29_eppo_ind_gap_on_ant/launch.sh --stash    # after --stop: each unfinished run's resume point, to commit
#
# Each configuration runs the code of its own pinned commit (cloned into $ROOT/code/<commit>), so later commits on
# main never change a run half-way; config.json records the commit. PPO's line needs nothing the walk added, so
# it started at once; the walk's EPPO lines run the commit that added the critic's diagnostics (evidential/nu_min,
# ...), the screen's the commit that added the readings' flags. The lines start in this order as cores free up.
# Carried across sessions and machines as studies/2026-11-26_paper_length_v0.1_defaults's runs are (its resume_store.py).
set -u
ROOT=${EPPO_CRITIC_ROOT:-/work/eppo_critic}
RUNS=$ROOT/runs
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && git rev-parse --show-toplevel)
HERE=$REPO/studies/2026-11-29_eppo_ind_gap_on_ant
OUTPUTS=$HERE/outputs
STORE=$HERE/resume
RESUME_STORE=$REPO/studies/2026-11-26_paper_length_v0.1_defaults/resume_store.py
WORKERS=${EPPO_CRITIC_WORKERS:-2}
RUN_FLAGS="--seed 1001 --num-seeds 3 --torch-threads 1 --env-threads 1"  # every line: the seeds, one core
PROTOCOL="--env-id Ant-v5 --experiment paralysis --strategy back-one --num-tasks 5 $RUN_FLAGS"
# name | pinned commit | script | the configuration's own flags (everything else: the script's defaults)
#   [| a protocol replacing PROTOCOL: the rule's pipeline checks, under checks/, run on other tasks]
CONFIGS=(
    "PPO|af688c07ad5255201fe5204349079dbd653e9ee3|ppo_continuous.py|"
    "EPPO_mse_mean|EPPO_PIN|eppo_continuous.py|--critic-loss mse --variant mean"
    "EPPO_mean|EPPO_PIN|eppo_continuous.py|--variant mean"
    "EPPO_ind|EPPO_PIN|eppo_continuous.py|--variant ind --kappa 0.01"
    # item 2's screen of the readings (README, "The rule"): EPPO_ind at kappa 0.01 with one flag each, at the commit
    # where the flags leave the default's numerics bit for bit (the golden outputs pass; 694ffe0, the first with the
    # flags, summed the loss's gradients in another order), and PPO with --norm-reward
    "EPPO_ind+hp-algorithm1|b7021b78fc558b7a019eba98449c5af3c1759188|eppo_continuous.py|--variant ind --kappa 0.01 --hyperprior-terms algorithm1"
    "EPPO_ind+norm-reward|b7021b78fc558b7a019eba98449c5af3c1759188|eppo_continuous.py|--variant ind --kappa 0.01 --norm-reward"
    # PPO with --norm-reward on the walk's protocol: the issue asks for it, and the rule compares norm-reward with it
    # (moved ahead of the grid at 04:27 UTC with the checks below: norm-reward, at 1.7 M of 2.5 M, was then above
    # EPPO_ind on every seed; the checks decide only if it still is at 2.5 M)
    "PPO+norm-reward|af688c07ad5255201fe5204349079dbd653e9ee3|ppo_continuous.py|--norm-reward"
    # the rule's two pipeline checks for --norm-reward, a change to every script (README, "The pipeline checks"):
    # PPO walks on the intact Ant-v5 within 500k steps; PPO is not lower on HalfCheetah-v5 back-one at 1 M steps
    "checks/ant-intact-500k/PPO+norm-reward|af688c07ad5255201fe5204349079dbd653e9ee3|ppo_continuous.py|--norm-reward|--env-id Ant-v5 --experiment none --steps-per-task 500000 $RUN_FLAGS"
    "checks/halfcheetah-back-one-1M/PPO|af688c07ad5255201fe5204349079dbd653e9ee3|ppo_continuous.py||--env-id HalfCheetah-v5 --experiment paralysis --strategy back-one --num-tasks 2 $RUN_FLAGS"
    "checks/halfcheetah-back-one-1M/PPO+norm-reward|af688c07ad5255201fe5204349079dbd653e9ee3|ppo_continuous.py|--norm-reward|--env-id HalfCheetah-v5 --experiment paralysis --strategy back-one --num-tasks 2 $RUN_FLAGS"
    # the rule's kappa grid at the reading it chose: norm-reward was "better" at 2.5 M (04:49 UTC: higher on every
    # seed, +33 %), so with its checks passed it becomes the default and the grid runs at it (0.01: the screen's run)
    "EPPO_ind+norm-reward_kappa0.05|b7021b78fc558b7a019eba98449c5af3c1759188|eppo_continuous.py|--variant ind --kappa 0.05 --norm-reward"
    "EPPO_ind+norm-reward_kappa0.1|b7021b78fc558b7a019eba98449c5af3c1759188|eppo_continuous.py|--variant ind --kappa 0.1 --norm-reward"
    # the evidence-only readings (README, "The rule": they can explain the gap, not become the default), one flag each
    # on today's EPPO_ind at raw rewards, against the walk's EPPO_ind: is it the evidence's share of each clipped
    # critic step (clip-none), or the Student-t's treatment of large errors (nll-mse-omega)? Moved ahead of the
    # raw-reward kappa grid and that grid taken out of the queue at 2026-11-29 06:25 UTC, before any of these four
    # started: with reward normalization the default, a kappa on raw rewards bears on no choice left, and its
    # ~2.3 h of both cores go to item 4 instead (README, "Left out")
    "EPPO_ind+clip-none|b7021b78fc558b7a019eba98449c5af3c1759188|eppo_continuous.py|--variant ind --kappa 0.01 --critic-grad-clip none"
    "EPPO_ind+nll-mse-omega|b7021b78fc558b7a019eba98449c5af3c1759188|eppo_continuous.py|--variant ind --kappa 0.01 --critic-loss nll-mse-omega"
    # the open question the evidence-only lines left (README, "Left out"): does unclipping the critic help at the new
    # default too? Against EPPO_ind+norm-reward (the same commit and flags but the clip); added 2026-11-29 16:55 UTC,
    # after item 4 finished; evidence only, it cannot become the default (the paper states the clip)
    "EPPO_ind+norm-reward+clip-none|b7021b78fc558b7a019eba98449c5af3c1759188|eppo_continuous.py|--variant ind --kappa 0.01 --norm-reward --critic-grad-clip none"
)
EPPO_PIN=$(cat "$HERE/eppo_pin" 2>/dev/null)
RUNNING="^bash $REPO/scripts/run_one.sh $RUNS/"
# whether a run under this folder is running (fixed strings: the names hold regex characters such as +)
running() { pgrep -af "$RUNNING" | grep -qF "run_one.sh $1"; }

status() {
    python3 - "$RUNS" <<'PY'
import csv, glob, json, os, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--status | head` ends quietly
root = sys.argv[1]
print(f"{'run':<34} {'steps':>9} {'of':>9}  state")
for config in sorted(glob.glob(os.path.join(root, "**", "config.json"), recursive=True)):
    run_dir = os.path.dirname(config)
    total = json.load(open(config))["total_steps"]
    path = os.path.join(run_dir, "evaluations.csv")
    rows = list(csv.DictReader(open(path))) if os.path.exists(path) else []
    step = int(rows[-1]["global_step"]) if rows else 0
    state = "finished" if os.path.exists(os.path.join(run_dir, "summary.json")) else "unfinished"
    print(f"{os.path.relpath(run_dir, root):<34} {step:>9,} {total:>9,}  {state}")
PY
}

case ${1:-} in
    --status) status; exit 0 ;;
    --collect)
        (cd "$RUNS" && find . -name config.json -printf '%h\n') | while read -r run; do
            mkdir -p "$OUTPUTS/$run"
            for name in config.json evaluations.csv plasticity.csv summary.json; do
                [[ -f $RUNS/$run/$name ]] && cp "$RUNS/$run/$name" "$OUTPUTS/$run/$name"
            done
        done
        # the TensorBoard scalars the analysis reads (the event files are megabytes; these are kilobytes)
        python3 "$HERE/scalars.py" --collect "$RUNS" "$OUTPUTS" || exit 1
        echo "copied into $OUTPUTS"; exit 0 ;;
    --stash)
        if pgrep -f "$RUNNING" >/dev/null; then
            echo "error: runs are still running; --stop them first, then --stash" >&2; exit 2
        fi
        python3 "$RESUME_STORE" stash "$RUNS" "$STORE" || exit
        # the TensorBoard scalars up to the resume point go with it (scalars.py: the event files stay behind)
        python3 "$HERE/scalars.py" --stash "$RUNS" "$STORE" || exit 1
        echo "stashed into $STORE (commit it)"; exit 0 ;;
    --stop)
        # the queue first, so that it starts nothing in the slots the stopped runs free
        [[ -f $ROOT/queue.pid ]] && kill -TERM "$(cat "$ROOT/queue.pid")" 2>/dev/null && echo "stopped the queue"
        pkill -TERM -f "$RUNNING" || echo "nothing running"; exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--status | --stop | --collect | --stash]" >&2; exit 2 ;;
esac

mkdir -p "$RUNS" "$ROOT/code"
echo "[launch $(date '+%F %T')] runs in $RUNS" >>"$ROOT/launch.log"
python3 "$RESUME_STORE" restore "$RUNS" "$STORE" "$OUTPUTS" | sed 's/^/[restore] /' | tee -a "$ROOT/launch.log"
# a resume point restored on a fresh machine brings the scalars of the earlier machines (scalars.py's CARRIED)
python3 "$HERE/scalars.py" --restore "$RUNS" "$STORE" | sed 's/^/[restore] /' | tee -a "$ROOT/launch.log"
lines=()
for config in "${CONFIGS[@]}"; do
    IFS='|' read -r name pin script flags protocol <<<"$config"
    [[ $pin == EPPO_PIN ]] && pin=$EPPO_PIN
    if [[ -z $pin ]]; then echo "skipping $name: no pinned commit yet ($HERE/eppo_pin)"; continue; fi
    if running "$RUNS/$name/"; then echo "already running: $name"; continue; fi
    code=$ROOT/code/$pin
    if [[ ! -d $code/.git ]]; then
        git clone --quiet --no-checkout "$REPO" "$code" && git -C "$code" checkout --quiet --detach "$pin" || {
            echo "error: could not clone $REPO at $pin into $code" >&2; exit 1; }
    fi
    lines+=("$RUNS/$name/seed1001|python3 $code/$script ${protocol:-$PROTOCOL} $flags --run-dir '$RUNS/$name/seed{seed}'")
done
# one queue at a time: an earlier launch's queue (its lines not started yet) is replaced by this one; the runs it
# started go on (run_one.sh is not its job to stop) and this queue skips them as running
if [[ -f $ROOT/queue.pid ]] && kill -0 "$(cat "$ROOT/queue.pid")" 2>/dev/null; then
    kill -TERM "$(cat "$ROOT/queue.pid")" && echo "replaced the queue of an earlier launch"
fi
(
    echo "$BASHPID" >"$ROOT/queue.pid"
    for line in "${lines[@]}"; do
        IFS='|' read -r run_dir command <<<"$line"
        # at most WORKERS runs at a time, counting those an earlier launch started (still running)
        while (($(pgrep -fc "$RUNNING") >= WORKERS)); do sleep 30; done
        running "${run_dir%seed1001}" && continue  # started by an earlier launch meanwhile
        nice -n 19 bash "$REPO/scripts/run_one.sh" "$run_dir" "$command" &
        sleep 5
    done
    wait
    echo "[launch $(date '+%F %T')] every started configuration ended"
) >>"$ROOT/launch.log" 2>&1 </dev/null &
disown
echo "started in the background; log: $ROOT/launch.log"
