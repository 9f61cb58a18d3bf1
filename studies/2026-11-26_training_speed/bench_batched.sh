#!/bin/bash
# The method / plumbing split (`821329e`) and the batched simulator (mujoco.batch), on the 2-core development machine with nothing else running (2026-11-26):
#  1. BatchedEnv against gymnasium's env.unwrapped.step per env step on one thread, both envs; Ant with 1 and 2
#     threads (scripts/benchmark_batched_env.py);
#  2. training steps/s of ppo_continuous.py at --num-seeds 1 and 4 on both envs, interleaved: "before" (be2fa2a:
#     the scripts before either change, gymnasium envs stepped one by one), "restructured" (821329e: the method /
#     plumbing split, still gymnasium envs) and "batched" (this commit: mujoco.batch), the last with
#     --env-threads 1 and with its default (the CPUs the process may use, at most one per simulation); 8,192 steps
#     per seed at K = 1, 4,096 at K = 4, three interleaved repeats.
# Output: batched.log beside this script.
set -u
cd "$(dirname "$0")/../.."
rm -rf /tmp/v_before /tmp/v_restructured && mkdir -p /tmp/v_before /tmp/v_restructured
git archive be2fa2a | tar -x -C /tmp/v_before
git archive 821329e | tar -x -C /tmp/v_restructured
here=$(pwd)
echo "# $(date -u '+%F %T') load: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
python scripts/benchmark_batched_env.py --repeats 3
bench() {  # label dir env k [script flags] -> one line
    local label=$1 dir=$2 env=$3 k=$4; shift 4
    local steps=$((k == 1 ? 8192 : 4096))
    local text
    text=$(cd "$dir" && python scripts/benchmark_sps.py ppo_continuous.py --env-id "$env" --steps "$steps" \
        --raw-steps 10000 --num-seeds "$k" -- --no-cuda "$@" 2>/dev/null)
    printf '%-28s %-15s K=%-2s raw %8s  train %8s\n' "$label" "$env" "$k" \
        "$(sed -n 's/^raw env SPS *\([0-9,]*\).*/\1/p' <<<"$text")" \
        "$(sed -n 's/^train SPS *\([0-9,]*\) in aggregate.*/\1/p' <<<"$text")"
}
for rep in 1 2 3; do
    echo "== repeat $rep ($(date -u '+%T'), load $(cut -d' ' -f1-3 /proc/loadavg))"
    for env in HalfCheetah-v5 Ant-v5; do
        for k in 1 4; do
            bench before /tmp/v_before "$env" "$k"
            bench restructured /tmp/v_restructured "$env" "$k"
            bench "batched, 1 thread" "$here" "$env" "$k" --env-threads 1
            ((k > 1)) && bench "batched, default threads" "$here" "$env" "$k"
        done
    done
done
