#!/usr/bin/env bash
# Runs the six SB3 anchor runs one after another (never two at once), on one core, at the lowest priority:
#   sb3_default 1001, sb3_paper 1001, sb3_default 1002, sb3_paper 1002, sb3_default 1003, sb3_paper 1003
# Output: $ROOT/{config}/seed{seed}/ (evaluations.csv, training.csv, config.json, run.log).
# A run whose config.json says "finished": true is skipped, so the driver can be restarted; an unfinished run
# is started again from scratch (its CSVs are rewritten).
# Launch detached:  setsid nohup bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/sb3/run_all.sh > /work/ant_walk_sb3/driver.log 2>&1 < /dev/null &
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${ROOT:-/work/ant_walk_sb3}"
STEPS="${STEPS:-1000000}"
PYTHON="${PYTHON:-python}"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
for seed in 1001 1002 1003; do
  for config in sb3_default sb3_paper; do
    out="$ROOT/$config/seed$seed"
    if [ -f "$out/config.json" ] && grep -q '"finished": true' "$out/config.json"; then
      echo "$(date '+%F %T') skip $config seed $seed (finished)"
      continue
    fi
    mkdir -p "$out"
    echo "$(date '+%F %T') start $config seed $seed -> $out"
    nice -n 19 "$PYTHON" "$HERE/sb3_anchor.py" --config "$config" --seed "$seed" --total-steps "$STEPS" \
      --out "$out" > "$out/run.log" 2>&1
    echo "$(date '+%F %T') end $config seed $seed rc=$?"
  done
done
echo "$(date '+%F %T') all done"
