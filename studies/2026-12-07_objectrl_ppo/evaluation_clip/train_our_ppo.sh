#!/usr/bin/env bash
# Our default PPO, paralysis back-one, the first 2 tasks (1 M steps), seeds 1-3 in one process, then both
# evaluations of each seed's final policy (scripts/evaluate.py prints the clipped and the unclipped return).
# Ran 2026-12-08 on main at 71de29d; its evaluations equal the committed v0.3 runs' bit for bit to 1 M.
#   bash studies/2026-12-07_objectrl_ppo/evaluation_clip/train_our_ppo.sh ROOT ENV
set -eu
ROOT=$1 ENV=$2
nice -n 19 python ppo_continuous.py --env-id "$ENV-v5" --experiment paralysis --strategy back-one --num-tasks 2 \
    --seed 1 --num-seeds 3 --torch-threads 1 --env-threads 1 --run-dir "$ROOT/runs/$ENV/PPO/seed{seed}"
for seed in 1 2 3; do
    python scripts/evaluate.py "$ROOT/runs/$ENV/PPO/seed$seed" --task 1 \
        > "studies/2026-12-07_objectrl_ppo/evaluation_clip/our_ppo_${ENV}_seed$seed.json"
done
