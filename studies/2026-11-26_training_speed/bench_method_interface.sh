#!/bin/bash
# The method interface of 2026-11-26 (`9828e01`: the method owns its policy, rewards and update outputs; BatchedEnv.step per environment; start_run in
# steps): training steps/s of ppo_continuous.py and eppo_continuous.py before (aa9ecc0) and after (the commit given
# as $1, default HEAD), both exported with git archive, interleaved, three repeats, on the 2-core development
# machine with the paper-length runs paused (studies/2026-11-26_paper_length_v0.1_defaults/launch.sh --stop) and nothing else running.
#   bash studies/2026-11-26_training_speed/bench_method_interface.sh [COMMIT] > studies/2026-11-26_training_speed/method_interface.log
set -u
cd "$(dirname "$0")/../.."
after=${1:-HEAD}
rm -rf /tmp/v22_before /tmp/v22_after && mkdir -p /tmp/v22_before /tmp/v22_after
git archive aa9ecc0 | tar -x -C /tmp/v22_before
git archive "$after" | tar -x -C /tmp/v22_after
echo "# $(date -u '+%F %T') before aa9ecc0, after $(git rev-parse --short "$after"); load: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
bench() {  # label dir script env k [script flags] -> one line
    local label=$1 dir=$2 script=$3 env=$4 k=$5; shift 5
    local steps=$((k == 1 ? 8192 : 4096))
    local text
    text=$(cd "$dir" && python scripts/benchmark_sps.py "$script" --env-id "$env" --steps "$steps" \
        --raw-steps 10000 --num-seeds "$k" -- --no-cuda --env-threads 1 "$@" 2>/dev/null)
    printf '%-7s %-20s %-15s K=%-2s raw %8s  train %8s\n' "$label" "$script" "$env" "$k" \
        "$(sed -n 's/^raw env SPS *\([0-9,]*\).*/\1/p' <<<"$text")" \
        "$(sed -n 's/^train SPS *\([0-9,]*\) in aggregate.*/\1/p' <<<"$text")"
}
for rep in 1 2 3; do
    echo "== repeat $rep ($(date -u '+%T'), load $(cut -d' ' -f1-3 /proc/loadavg))"
    for env in HalfCheetah-v5 Ant-v5; do
        for k in 1 4; do
            bench before /tmp/v22_before ppo_continuous.py "$env" "$k"
            bench after /tmp/v22_after ppo_continuous.py "$env" "$k"
        done
        bench before /tmp/v22_before eppo_continuous.py "$env" 1 --variant ind --kappa 0.01
        bench after /tmp/v22_after eppo_continuous.py "$env" 1 --variant ind --kappa 0.01
    done
done
