#!/usr/bin/env bash
# One SLURM array task of scripts/slurm_sweep.sh: runs line OFFSET + SLURM_ARRAY_TASK_ID (0-based) of
# a run list (RUN_DIR<TAB>COMMAND, from scripts/runlist.py) through scripts/run_one.sh.
#
#   sbatch --array=0-(n-1)%P ... scripts/slurm_task.sh /path/to/run_one.sh LIST OFFSET
#
# A run that exits 75 (preempted: checkpoint written) requeues this array task with
# `scontrol requeue <array job>_<task>`; the rerun resumes from the checkpoint. SIGTERM sent to this
# shell (sbatch --signal=B:TERM@..., before the time limit) is forwarded to the run.
set -u

if [[ $# -ne 3 || -z ${SLURM_ARRAY_TASK_ID:-} ]]; then
    echo "usage: sbatch --array=... $0 RUN_ONE_SH RUN_LIST OFFSET   (needs SLURM_ARRAY_TASK_ID)" >&2
    exit 2
fi
run_one=$1
list=$2
index=$(($3 + SLURM_ARRAY_TASK_ID))
line=$(sed -n "$((index + 1))p" "$list")
if [[ -z $line ]]; then
    echo "error: $list has no line $index" >&2
    exit 2
fi
run_dir=${line%%$'\t'*}
command=${line#*$'\t'}

echo "[slurm_task $(date '+%F %T')] job ${SLURM_ARRAY_JOB_ID:-?}_${SLURM_ARRAY_TASK_ID} (id ${SLURM_JOB_ID:-?}," \
    "restart ${SLURM_RESTART_COUNT:-0}) on $(hostname): $run_dir"
"$run_one" "$run_dir" "$command" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
while :; do
    wait "$child"
    rc=$?
    kill -0 "$child" 2>/dev/null || break
done
echo "[slurm_task $(date '+%F %T')] exit code $rc"
if [[ $rc -eq 75 ]]; then
    # JOBID_TASK names this task alone; the bare SLURM_JOB_ID of the array's first task is also the
    # array's id, and requeueing that would requeue (and kill) every task of the array.
    task_id=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}
    echo "[slurm_task] preempted with a checkpoint: requeueing $task_id"
    scontrol requeue "$task_id" || echo "[slurm_task] requeue failed; re-run slurm_sweep.sh to resume" >&2
fi
exit "$rc"
