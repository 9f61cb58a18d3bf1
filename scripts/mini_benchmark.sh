#!/usr/bin/env bash
# Laptop-scale version of the paper's study, to check the whole pipeline and see the methods move.
#
#   scripts/mini_benchmark.sh [ROOT]          (default ROOT: runs/mini_benchmark)
#
# HalfCheetah-v5, paralysis back-one (joint 2's torque 1 -> 0 -> 1 over 9 tasks), PPO vs EPPO_mean,
# EPPO_cor (kappa 0.05) and EPPO_ind (kappa 0.01) -- the paper's kappa for this setting
# (scripts/paper_kappa.csv) --, seeds 1-3, with tasks of 50,000 steps instead of 500,000 (450,000 steps per
# run) and an evaluation every 10,000 steps (10 episodes). 12 runs on 2 parallel workers; the measured wall
# time is in docs/history.md. Then it prints the result table (ROOT/results.md) and draws the learning curves
# and plasticity figures (ROOT/plots/).
#
# What it shows: that every part runs end to end at a scale where learning is visible, and how the methods
# compare after 50k steps per task. What it does not show: the paper's results, which use 10x longer tasks
# and 15 seeds; with 3 seeds a difference has to be large to be significant.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-runs/mini_benchmark}
start=$(date +%s)
status=0
scripts/sweep.sh --methods PPO,EPPO_mean,EPPO_cor,EPPO_ind --settings paralysis/HalfCheetah/back-one \
    --seeds 1-3 --root "$root" --workers 2 -- --steps-per-task 50000 --eval-frequency 10000 || status=$?
echo "sweep wall time: $(( $(date +%s) - start )) s (exit $status)"
python scripts/summarize.py "$root" --output "$root/results.md"
cat "$root/results.md"
python scripts/plot_curves.py "$root"
exit "$status"
