#!/usr/bin/env bash
# Submit a sweep to SLURM as one job array (CleanRL's pattern): the run list goes to a file, array
# task i runs line i (scripts/slurm_task.sh -> scripts/run_one.sh).
#
#   scripts/slurm_sweep.sh --all --methods PPO,EPPO_cor,EPPO_ind --seeds 1-15 --root runs/sweep \
#       --partition gpu --time 24:00:00 --cpus-per-task 2 --gres gpu:1 --max-parallel 50 [-- EXTRA FLAGS]
#
# Only unfinished runs (no summary.json) are submitted, so re-running the same command after a
# failure or cancellation submits what is left. Run directories, run selection and extra flags are
# those of scripts/sweep.sh (scripts/runlist.py). Per-task SLURM logs: <root>/slurm/logs/<job>_<task>.out
# (appended across requeues); each run's own output: <run_dir>/stdout.log and stderr.log.
# A run that exits 75 (preempted with a checkpoint; also on SIGTERM sent --signal-grace seconds
# before the time limit) requeues its array task, which then resumes from the checkpoint.
set -u

SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS_PYTHON=${EPPO_TOOLS_PYTHON:-python3}

usage() {
    cat <<EOF
usage: scripts/slurm_sweep.sh [SLURM OPTIONS] RUN SELECTION [-- EXTRA FLAGS]

SLURM options:
  --partition P         partition (default: the cluster's default)
  --time T              time limit per run, e.g. 24:00:00 (default: the partition's)
  --cpus-per-task N     CPUs per run (default 1), and its --env-threads (the threads that step its simulations)
  --mem M               memory per run, e.g. 8G (default: the partition's)
  --gres G              generic resources per run, e.g. gpu:1 (SLURM sets CUDA_VISIBLE_DEVICES)
  --max-parallel N      array tasks running at once (the %N of --array; default 32)
  --max-array-size N    split longer run lists into several arrays (default 1000; SLURM's MaxArraySize is 1001)
  --signal-grace S      SIGTERM the run S seconds before the time limit so it checkpoints and requeues (default 300)
  --job-name NAME       (default eppo-sweep)
  --sbatch-arg ARG      any other sbatch option, repeatable (e.g. --sbatch-arg=--account=abc)
  --dry-run             print the run list and the sbatch command(s), submit nothing

Run selection (scripts/runlist.py):
EOF
    "$TOOLS_PYTHON" "$SCRIPTS_DIR/runlist.py" --help | sed -n '/^options:/,$p' | tail -n +3  # without "-h, --help"
}

partition='' time_limit='' cpus=1 mem='' gres='' max_parallel=32 max_array=1000 grace=300 job_name=eppo-sweep dry_run=0
sbatch_extra=()
runlist_args=()
need() { [[ $2 -ge 2 ]] || { echo "error: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) usage; exit 0 ;;
        --partition) need "$1" $#; partition=$2; shift 2 ;;
        --time) need "$1" $#; time_limit=$2; shift 2 ;;
        --cpus-per-task) need "$1" $#; cpus=$2; shift 2 ;;
        --mem) need "$1" $#; mem=$2; shift 2 ;;
        --gres) need "$1" $#; gres=$2; shift 2 ;;
        --max-parallel) need "$1" $#; max_parallel=$2; shift 2 ;;
        --max-array-size) need "$1" $#; max_array=$2; shift 2 ;;
        --signal-grace) need "$1" $#; grace=$2; shift 2 ;;
        --job-name) need "$1" $#; job_name=$2; shift 2 ;;
        --sbatch-arg) need "$1" $#; sbatch_extra+=("$2"); shift 2 ;;
        --sbatch-arg=*) sbatch_extra+=("${1#*=}"); shift ;;
        --dry-run) dry_run=1; shift ;;
        --pending | --show-root) echo "error: $1 is internal to the sweep scripts" >&2; exit 2 ;;
        --) runlist_args+=("$@"); break ;;
        *) runlist_args+=("$1"); shift ;;
    esac
done
for pair in "cpus-per-task:$cpus" "max-parallel:$max_parallel" "max-array-size:$max_array"; do
    if ! [[ ${pair#*:} =~ ^[1-9][0-9]*$ ]]; then
        echo "error: --${pair%%:*} must be a positive integer, got '${pair#*:}'" >&2
        exit 2
    fi
done
if ! [[ $grace =~ ^[0-9]+$ ]]; then
    echo "error: --signal-grace must be a non-negative integer (seconds), got '$grace'" >&2
    exit 2
fi

# Each run steps its simulations (mujoco.batch) on the --cpus-per-task CPUs SLURM gives it (--env-threads), unless
# the extra flags set --env-threads themselves (runlist.py sees to that).
runlist_args=(--env-threads "$cpus" "${runlist_args[@]}")

pending=$("$TOOLS_PYTHON" "$SCRIPTS_DIR/runlist.py" --pending "${runlist_args[@]}") || exit 2
root=$("$TOOLS_PYTHON" "$SCRIPTS_DIR/runlist.py" --show-root "${runlist_args[@]}") || exit 2
n=$(grep -c . <<<"$pending")
if ((n == 0)); then
    echo "nothing to submit: every run of the selection has finished (summary.json) under $root"
    exit 0
fi

stamp=$(date +%Y%m%d-%H%M%S)-$$
list=$root/slurm/runlist-$stamp.tsv
logs=$root/slurm/logs
options=(--parsable --job-name="$job_name" --output="$logs/%A_%a.out" --error="$logs/%A_%a.out" --open-mode=append
         --requeue --cpus-per-task="$cpus" --chdir="$(dirname "$SCRIPTS_DIR")")
[[ -n $partition ]] && options+=(--partition="$partition")
[[ -n $time_limit ]] && options+=(--time="$time_limit")
[[ -n $mem ]] && options+=(--mem="$mem")
[[ -n $gres ]] && options+=(--gres="$gres")
((grace > 0)) && options+=(--signal="B:TERM@$grace")
options+=("${sbatch_extra[@]}")

if ((dry_run)); then
    echo "# run list ($n unfinished runs) -> $list"
    cut -f2 <<<"$pending"
fi
[[ $dry_run -eq 1 ]] || { mkdir -p "$logs" && printf '%s\n' "$pending" >"$list"; } || exit 1

job_ids=()
for ((offset = 0; offset < n; offset += max_array)); do
    size=$((n - offset < max_array ? n - offset : max_array))
    command=(sbatch "${options[@]}" --array="0-$((size - 1))%$max_parallel" "$SCRIPTS_DIR/slurm_task.sh" "$SCRIPTS_DIR/run_one.sh" "$list" "$offset")
    if ((dry_run)); then
        printf '%q ' "${command[@]}"
        echo
        continue
    fi
    job_id=$("${command[@]}") || { echo "error: sbatch failed (submitted so far: ${job_ids[*]:-none})" >&2; exit 1; }
    job_ids+=("${job_id%%;*}")
done
((dry_run)) && exit 0

echo "submitted $n run(s) as job array(s) ${job_ids[*]} (at most $max_parallel running per array)"
echo "run list:   $list"
echo "watch:      squeue -j $(IFS=,; echo "${job_ids[*]}")   |   scontrol show job ${job_ids[0]}"
echo "task logs:  $logs/<job>_<task>.out    run logs: <run_dir>/stdout.log, stderr.log"
echo "cancel:     scancel ${job_ids[*]}    (re-run this command later to submit the unfinished runs)"
echo "results:    python scripts/summarize.py $root"
