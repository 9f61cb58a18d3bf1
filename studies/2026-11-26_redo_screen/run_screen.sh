#!/bin/bash
# The PPO_ReDo screen (docs/baselines.md, "PPO_ReDo (screen)"): PPO and PPO_ReDo, 3 seeds (1001-1003) in one process
# per method and environment, from the code of commit 1e9a712 exported outside the work tree (other sessions were
# editing the template meanwhile); two processes at a time on the 2-core machine. Run from the repository root.
set -e
mkdir -p /tmp/redo_screen/code
git archive 1e9a712 | tar -x -C /tmp/redo_screen/code
cd /tmp/redo_screen/code
common="--experiment paralysis --strategy back-one --steps-per-task 40000 --num-tasks 5 --seed 1001 --num-seeds 3 --env-threads 1"
for env in HalfCheetah Ant; do
  python ppo_continuous.py --env-id $env-v5 $common --run-dir /tmp/redo_screen/$env/PPO/seed{seed} > /tmp/redo_screen/$env-PPO.log 2>&1 &
  python ppo_redo_continuous.py --env-id $env-v5 $common --run-dir /tmp/redo_screen/$env/PPO_ReDo/seed{seed} > /tmp/redo_screen/$env-PPO_ReDo.log 2>&1 &
  wait
done
# then, from /tmp/redo_screen/code: python <repo>/studies/2026-11-26_redo_screen/analyze.py /tmp/redo_screen
#                                   python <repo>/studies/2026-11-26_redo_screen/diagnose_recycles.py HalfCheetah /tmp/redo_screen
