#!/usr/bin/env bash
# The seven methods' training pace on one machine, for the cost rows: each script at this study's settings, one
# process at a time (the study paused, the machine otherwise quiet), two interleaved repeats, Ant-v5 and
# HalfCheetah-v5 paralysis back-one, one task of 8,192 steps per seed, --num-seeds 5 (the study's phase 1), the code
# of the study's pinned commit (its clone; the first argument moves it). Prints summary.json's group_train_sps
# (training steps/s of the process, its evaluations excluded) per run, one line each.
#
#   bash studies/2026-12-01_paper_length_all_seven_methods/bench_pace.sh [CODE_DIR] | tee .../pace.log
set -u
code=${1:-${BASELINES_PAPER_LENGTH_ROOT:-/work/baselines_paper_length}/code}
out=$(mktemp -d /tmp/bench_pace.XXXXXX)
cd "$code" || exit 2
echo "# $(date -u '+%F %T') UTC, code $(git rev-parse --short HEAD 2>/dev/null || echo "$code"), $(nproc) CPUs," \
     "$(lscpu | sed -n 's/^Model name: *//p'), L3 $(lscpu | sed -n 's/^L3 cache: *//p')"
declare -A flags=(
    [PPO]="ppo_continuous.py" [EPPO_ind]="eppo_continuous.py --variant ind"
    [EPPO_mean]="eppo_continuous.py --variant mean --kappa 0" [EPPO_cor]="eppo_continuous.py --variant cor"
    [PFO]="pfo_continuous.py" [CB]="cb_continuous.py" [PPO_DRND]="ppo_drnd_continuous.py"
)
for rep in 1 2; do
    for env in Ant-v5 HalfCheetah-v5; do
        for method in PPO PFO CB PPO_DRND EPPO_mean EPPO_cor EPPO_ind; do
            dir=$out/$rep/$env/$method && mkdir -p "$dir"
            # shellcheck disable=SC2086  # the flags split into words on purpose
            python ${flags[$method]} --env-id "$env" --experiment paralysis --strategy back-one \
                --steps-per-task 8192 --num-tasks 1 --eval-frequency 8192 --eval-episodes 1 --num-seeds 5 \
                --run-dir "$dir/seed{seed}" >/dev/null 2>"$dir.stderr" || { echo "$method $env failed"; exit 1; }
            python -c "import json,sys; s=json.load(open(sys.argv[1])); print(f'repeat {sys.argv[2]}  {sys.argv[3]:15} {sys.argv[4]:10} {s[\"group_train_sps\"]:7,.0f} steps/s per process')" \
                "$dir/seed1/summary.json" "$rep" "$env" "$method"
        done
    done
done
rm -rf "$out"
