#!/bin/bash
# every script at --num-seeds 1 on both envs, then PPO vs EPPO_ind interleaved 3x, then PPO at K=4 (CPU)
cd /work/main
for env in HalfCheetah-v5 Ant-v5; do
  for s in ppo eppo pfo cb ppo_drnd; do
    extra=(); [[ $s == eppo ]] && extra=(-- --variant ind --kappa 0.1)
    echo "== $s $env"; python scripts/benchmark_sps.py ${s}_continuous.py --env-id $env --steps 20480 "${extra[@]}" 2>/dev/null | grep -E "raw env|train SPS|train / raw|eval overhead"
  done
done
for env in HalfCheetah-v5 Ant-v5; do
  for i in 1 2 3; do
    for s in ppo eppo; do
      extra=(); [[ $s == eppo ]] && extra=(-- --variant ind --kappa 0.1)
      echo "== overhead $i $s $env"; python scripts/benchmark_sps.py ${s}_continuous.py --env-id $env --steps 20480 "${extra[@]}" 2>/dev/null | grep -E "raw env|train SPS"
    done
  done
done
for env in HalfCheetah-v5 Ant-v5; do
  echo "== ppo K=4 $env"; python scripts/benchmark_sps.py ppo_continuous.py --env-id $env --steps 8192 --num-seeds 4 2>/dev/null | grep -E "raw env|train SPS|train / raw"
done
