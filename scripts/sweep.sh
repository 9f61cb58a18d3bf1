#!/usr/bin/env bash
# Run a sweep (methods x settings x seeds) on one machine with N parallel workers.
#
#   scripts/sweep.sh --methods PPO,EPPO_ind --settings paralysis/HalfCheetah/back-one --seeds 1-15 \
#       --root runs/sweep --workers 4 [--gpus 0,1] [--seeds-per-process 16] [--dry-run] [-- EXTRA FLAGS FOR EVERY RUN]
#
# --seeds-per-process K packs up to K consecutive seeds of one method x setting into one process (--num-seeds;
# docs/batched-seeds.md has the recommended packing); a "run" below is then one such process.
#
# The run list comes from scripts/runlist.py (run selection flags: see --help). Every run gets the
# deterministic directory <root>/<experiment>/<env>/<strategy>/<method>/seed<k>, with its
# stdout/stderr appended to stdout.log/stderr.log there (scripts/run_one.sh). Runs whose
# summary.json exists are skipped, so relaunching the same command resumes the sweep; a run that
# exited 75 (preempted, checkpoint written) is retried once, and otherwise resumes on relaunch.
# Exit code: 0 all runs finished; 1 a run failed (listed at the end); 2 invalid arguments;
# 75 stopped by SIGTERM/SIGINT (the running runs wrote checkpoints; relaunch to resume), or a run still
# preempted at the end (it exited 75 again after its retry; relaunch to resume).
set -u
if ((BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 3))); then
    echo "error: sweep.sh needs bash >= 4.3 (wait -n, associative arrays); this is $BASH_VERSION" >&2
    exit 2
fi

SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS_PYTHON=${EPPO_TOOLS_PYTHON:-python3}  # runs runlist.py (stdlib only); --python picks the runs' interpreter

usage() {
    cat <<EOF
usage: scripts/sweep.sh [--workers N] [--gpus 0,1,...] [--dry-run] RUN SELECTION [-- EXTRA FLAGS]

Execution:
  --workers N      runs in parallel (default: number of --gpus, else 1); each gets --env-threads nproc / N
  --gpus LIST      comma list of GPU ids; run i gets CUDA_VISIBLE_DEVICES=LIST[i mod len] (round-robin)
  --dry-run        print the commands of the runs that would start, run nothing

Run selection (scripts/runlist.py):
EOF
    "$TOOLS_PYTHON" "$SCRIPTS_DIR/runlist.py" --help | sed -n '/^options:/,$p' | tail -n +3  # without "-h, --help"
}

workers=
gpus=()
dry_run=0
runlist_args=()
while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --workers) [[ $# -ge 2 ]] || { echo "error: --workers needs a value" >&2; exit 2; }; workers=$2; shift 2 ;;
        --workers=*) workers=${1#*=}; shift ;;
        --gpus) [[ $# -ge 2 ]] || { echo "error: --gpus needs a value" >&2; exit 2; }; IFS=, read -r -a gpus <<<"$2"; shift 2 ;;
        --gpus=*) IFS=, read -r -a gpus <<<"${1#*=}"; shift ;;
        --dry-run) dry_run=1; shift ;;
        --pending | --show-root) echo "error: $1 is internal to the sweep scripts" >&2; exit 2 ;;
        --) runlist_args+=("$@"); break ;;
        *) runlist_args+=("$1"); shift ;;
    esac
done
if [[ -z $workers ]]; then
    workers=$((${#gpus[@]} > 0 ? ${#gpus[@]} : 1))
fi
if ! [[ $workers =~ ^[1-9][0-9]*$ ]]; then
    echo "error: --workers must be a positive integer, got '$workers'" >&2
    exit 2
fi
for gpu in "${gpus[@]}"; do
    if [[ -z $gpu || $gpu =~ [[:space:]] ]]; then
        echo "error: --gpus must be a comma list of GPU ids like 0,1" >&2
        exit 2
    fi
done

# Each process steps its simulations (mujoco.batch) on its share of the cores this shell may use: --env-threads
# nproc / workers (at least 1), unless the extra flags set --env-threads themselves (runlist.py sees to that).
threads=$(($(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) / workers))  # nproc: the CPUs this shell may use
((threads >= 1)) || threads=1
runlist_args=(--env-threads "$threads" "${runlist_args[@]}")

# The whole run list first (validates the selection; exit 2 with the runlist's message), then the pending part.
all_text=$("$TOOLS_PYTHON" "$SCRIPTS_DIR/runlist.py" "${runlist_args[@]}") || exit 2
total=$(grep -c . <<<"$all_text")
pending_text=$("$TOOLS_PYTHON" "$SCRIPTS_DIR/runlist.py" --pending "${runlist_args[@]}") || exit 2
run_dirs=()
commands=()
while IFS=$'\t' read -r run_dir command; do
    [[ -n $run_dir ]] || continue
    run_dirs+=("$run_dir")
    commands+=("$command")
done <<<"$pending_text"
n_pending=${#run_dirs[@]}
n_skipped=$((total - n_pending))

gpu_for() {  # launch number -> GPU id (empty without --gpus)
    ((${#gpus[@]} > 0)) && echo "${gpus[$(($1 % ${#gpus[@]}))]}"
}

if ((dry_run)); then
    for i in "${!run_dirs[@]}"; do
        gpu=$(gpu_for "$i")
        echo "${gpu:+CUDA_VISIBLE_DEVICES=$gpu }${commands[$i]}"
    done
    echo "# $total runs: $n_skipped already finished (skipped), $n_pending to run with $workers worker(s)" >&2
    exit 0
fi

echo "[sweep] $total runs: $n_skipped already finished (skipped), $n_pending to run with $workers worker(s)"

stopping=0
declare -A pid_to_index=()  # running run_one.sh processes
declare -A attempts=()
queue=("${!run_dirs[@]}")
finished=()
failed=()   # "index:exit code"
preempted=()
launches=0

on_signal() {
    ((stopping)) && return
    stopping=1
    echo "[sweep] $1 received: stopping ${#pid_to_index[@]} running run(s) (they checkpoint and exit 75); relaunch to resume" >&2
    local pid
    for pid in "${!pid_to_index[@]}"; do kill -TERM "$pid" 2>/dev/null; done
}
trap 'on_signal SIGTERM' TERM
trap 'on_signal SIGINT' INT

launch() {
    local index=$1 gpu
    gpu=$(gpu_for "$launches")
    launches=$((launches + 1))
    attempts[$index]=$((${attempts[$index]:-0} + 1))
    echo "[sweep] start ($((launches))) ${gpu:+gpu $gpu }${run_dirs[$index]}"
    if [[ -n $gpu ]]; then
        CUDA_VISIBLE_DEVICES=$gpu "$SCRIPTS_DIR/run_one.sh" "${run_dirs[$index]}" "${commands[$index]}" &
    else
        "$SCRIPTS_DIR/run_one.sh" "${run_dirs[$index]}" "${commands[$index]}" &
    fi
    pid_to_index[$!]=$index
}

reap() {  # collect every run_one.sh that has ended
    local pid index rc
    for pid in "${!pid_to_index[@]}"; do
        kill -0 "$pid" 2>/dev/null && continue
        wait "$pid"
        rc=$?
        index=${pid_to_index[$pid]}
        unset "pid_to_index[$pid]"
        if [[ $rc -eq 0 ]]; then
            finished+=("$index")
            echo "[sweep] done ${run_dirs[$index]}"
        elif [[ $rc -eq 75 && $stopping -eq 0 && ${attempts[$index]} -lt 2 ]]; then
            echo "[sweep] preempted (exit 75), retrying once: ${run_dirs[$index]}"
            queue+=("$index")
        elif [[ $rc -eq 75 ]] || ((stopping && (rc == 143 || rc == 130))); then
            # 143/130: our SIGTERM reached the run before it installed its handler (e.g. while importing)
            preempted+=("$index")
            echo "[sweep] preempted (exit $rc), resumes on relaunch: ${run_dirs[$index]}"
        else
            failed+=("$index:$rc")
            echo "[sweep] FAILED (exit $rc): ${run_dirs[$index]}"
        fi
    done
}

while :; do
    ((stopping)) && queue=()
    while ((${#queue[@]} > 0 && ${#pid_to_index[@]} < workers)); do
        launch "${queue[0]}"
        queue=("${queue[@]:1}")
    done
    ((${#pid_to_index[@]} == 0)) && break
    wait -n  # returns when a run ends or a trapped signal arrives
    reap
done

not_started=$((n_pending - ${#finished[@]} - ${#failed[@]} - ${#preempted[@]}))
echo "[sweep] summary: $total runs: ${#finished[@]} finished now, $n_skipped already finished, ${#failed[@]} failed, ${#preempted[@]} preempted, $not_started not started"
for entry in "${failed[@]}"; do
    index=${entry%%:*}
    echo "[sweep]   FAILED exit ${entry#*:}: ${run_dirs[$index]} (log: ${run_dirs[$index]}/stderr.log)"
done
for index in "${preempted[@]}"; do
    echo "[sweep]   preempted: ${run_dirs[$index]} (relaunch the sweep to resume it)"
done
if ((${#failed[@]} > 0)); then
    exit 1
elif ((stopping || ${#preempted[@]} > 0)); then
    exit 75
fi
exit 0
