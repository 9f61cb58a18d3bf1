#!/usr/bin/env bash
# EPPO_ind on the stationary Ant-v5 at the candidate default (nonormstd1's flags), reward normalization off vs on:
# what the reward scale does to the evidential critic (the study's EPPO scale check). One seed (1001), 100k steps each.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
for rew in no-norm-reward norm-reward; do
  python eppo_continuous.py --env-id Ant-v5 --experiment none --steps-per-task 100000 --seed 1001 --kappa 0.1 \
    --no-norm-obs --log-std-init -1 --$rew --eval-frequency 50000 --eval-episodes 2 --torch-threads 1 --env-threads 1 \
    --run-dir ${EPPO_SCALE_ROOT:-/work/eppo_scale}/$rew > ${EPPO_SCALE_ROOT:-/work/eppo_scale}/$rew.log 2>&1
done
