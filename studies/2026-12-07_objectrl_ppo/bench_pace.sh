#!/usr/bin/env bash
# ObjectRL's PPO (the adapter, the paper's knobs) and our PPO with the rebuild flags, one seed each, interleaved
# repeats on one machine: training steps/s (evaluation time excluded) of each run, from its summary.json.
#   bash studies/2026-12-07_objectrl_ppo/bench_pace.sh [ROUNDS] [STEPS] >> studies/2026-12-07_objectrl_ppo/pace.log
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
ROUNDS=${1:-2}
STEPS=${2:-8192}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $cpu, $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); $STEPS steps per run, one evaluation episode"
for round in $(seq "$ROUNDS"); do
    for env in Ant-v5 HalfCheetah-v5; do
        "$HERE/.venv/bin/python" "$HERE/objectrl_ppo.py" --env-id "$env" --seed 1 --steps-per-task "$STEPS" \
            --num-tasks 1 --eval-frequency "$STEPS" --eval-episodes 1 --checkpoint-every $((STEPS * 2048)) \
            --run-dir "$OUT/objectrl_${env}_$round" > /dev/null 2>&1
        python "$REPO/ppo_continuous.py" --env-id "$env" --seed 1 --steps-per-task "$STEPS" --num-tasks 1 \
            --eval-frequency "$STEPS" --eval-episodes 1 --layer-norm plain --init torch --log-std-init 0 \
            --log-std-max -1 --no-norm-obs --no-norm-reward --run-dir "$OUT/ours_${env}_$round" > /dev/null 2>&1
        for who in objectrl ours; do
            sps=$(python -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))["train_sps"])' \
                  "$OUT/${who}_${env}_$round/summary.json")
            echo "round $round $env $who train_sps $sps"
        done
    done
done
