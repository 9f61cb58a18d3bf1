#!/bin/bash
# The PPO_SnP screen (docs/baselines.md, "PPO_SnP (screen)"): PPO_SnP with its defaults on HalfCheetah paralysis
# back-one, 5 tasks x 40k steps, seeds 1001-1003 in one process, from the code of commit 363535a exported outside
# the work tree; the PPO side is the PPO_ReDo screen's (studies/2026-11-26_redo_screen: the same flags and seeds, and PPO's
# outputs have not changed since, the golden tests say). Run from the repository root.
set -e
ROOT=${SNP_SCREEN_ROOT:-/work/snp_screen}
mkdir -p "$ROOT/code"
[ -f "$ROOT/code/ppo_snp_continuous.py" ] || git archive 363535a | tar -x -C "$ROOT/code"
cd "$ROOT/code"
nice -n 10 python ppo_snp_continuous.py --env-id HalfCheetah-v5 --experiment paralysis --strategy back-one \
    --steps-per-task 40000 --num-tasks 5 --seed 1001 --num-seeds 3 --env-threads 1 \
    --run-dir "$ROOT/HalfCheetah/PPO_SnP/seed{seed}" > "$ROOT/HalfCheetah-PPO_SnP.log" 2>&1
# then: python studies/2026-11-27_snp_screen/analyze.py /tmp/redo_screen $ROOT   (PPO from the ReDo screen's run directories)
