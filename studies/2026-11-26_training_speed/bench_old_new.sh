#!/bin/bash
# the single-seed PPO before the batching (07b0420) against --num-seeds 1 now, interleaved, HalfCheetah-v5
mkdir -p /tmp/oldrepo && cd /work/main && git archive 07b0420 | tar -x -C /tmp/oldrepo
for i in 1 2 3; do
  echo "== old $i"; (cd /tmp/oldrepo && python scripts/benchmark_sps.py ppo_continuous.py --env-id HalfCheetah-v5 --steps 20480 2>/dev/null | grep -E "raw env|train SPS")
  echo "== new $i"; (cd /work/main && python scripts/benchmark_sps.py ppo_continuous.py --env-id HalfCheetah-v5 --steps 20480 2>/dev/null | grep -E "raw env|train SPS")
done
