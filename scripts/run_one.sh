#!/usr/bin/env bash
# Run one line of a run list: scripts/run_one.sh RUN_DIR COMMAND
#
# Shared by sweep.sh (workstation) and slurm_task.sh (SLURM array task), so both treat a run alike:
#   - skips the run when RUN_DIR/summary.json exists (CONTRACT: the run finished) and exits 0;
#   - appends the run's stdout/stderr to RUN_DIR/stdout.log and RUN_DIR/stderr.log, so a resumed
#     run keeps what the earlier attempts printed;
#   - forwards SIGTERM/SIGINT to the run as SIGTERM (the algorithm script then writes a checkpoint
#     and exits 75); a background command in a non-interactive shell ignores SIGINT, hence TERM;
#   - exits with the run's exit code, or 1 when the run exited 0 without writing summary.json.
set -u

if [[ $# -ne 2 ]]; then
    echo "usage: $0 RUN_DIR COMMAND   (one line of scripts/runlist.py output)" >&2
    exit 2
fi
run_dir=$1
command=$2

if [[ -f "$run_dir/summary.json" ]]; then
    echo "already finished: $run_dir"
    exit 0
fi
mkdir -p "$run_dir" || exit 1

child=
forward() {
    [[ -n $child ]] && kill -TERM "$child" 2>/dev/null
}
trap forward TERM INT

echo "[run_one $(date '+%F %T') host=$(hostname) CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}] $command" >>"$run_dir/stdout.log"
# `exec` makes $child the algorithm process itself, so the forwarded TERM reaches it directly.
bash -c "exec $command" >>"$run_dir/stdout.log" 2>>"$run_dir/stderr.log" </dev/null &
child=$!
# `wait` returns early when a trapped signal arrives; keep waiting until the run itself has ended.
while :; do
    wait "$child"
    rc=$?
    kill -0 "$child" 2>/dev/null || break
done
echo "[run_one $(date '+%F %T')] exit code $rc" >>"$run_dir/stdout.log"

if [[ $rc -eq 0 && ! -f "$run_dir/summary.json" ]]; then
    echo "run exited 0 but wrote no summary.json: $run_dir" | tee -a "$run_dir/stderr.log" >&2
    exit 1
fi
exit "$rc"
