#!/usr/bin/env bash
# The short Ant study's comparison (studies/2026-11-26_eppo_vs_ppo_short_runs/README.md, "Ant, 5 tasks x 200k") again, at
# the new default: PPO and EPPO_ind (kappa 0.01, the paper's for this setting) on Ant-v5 paralysis back-one,
# 5 tasks x 200k steps, evaluation every 50k steps with 5 episodes, seeds 1-5 (the reporting seeds; nothing is
# chosen on them), the same commands as studies/2026-11-26_eppo_vs_ppo_short_runs/long_runs.txt with no flag added.
#
#   bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.sh PPO|EPPO_ind   # one --num-seeds 5 process, in this shell (one core)
#   bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.sh --status       # steps done per run
#   bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_study.sh --collect      # the small outputs into studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_outputs/
#
# The runs live in $ROOT/runs/<method>/seed<k> (default ROOT /work/ant_walk_short) and run the code of the new
# default's commit PIN, cloned into $ROOT/code (config.json records the commit). A finished run exits at once,
# an unfinished one resumes from its checkpoint.
set -u
PIN=d3270e2666667835da00fe1e6d0bc168967adca6  # v0.2's defaults (2026-11-27), REFERENCE_COMMIT of tests/golden
ROOT=${ANT_WALK_SHORT_ROOT:-/work/ant_walk_short}
CODE=$ROOT/code
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && git rev-parse --show-toplevel)
COMMON="--env-id Ant-v5 --experiment paralysis --strategy back-one --num-tasks 5 --steps-per-task 200000 \
--eval-frequency 50000 --eval-episodes 5 --no-cuda --seed 1 --num-seeds 5 --env-threads 1 --torch-threads 1"
case ${1:-} in
    --status)
        for d in "$ROOT"/runs/*/seed*; do
            [[ -f $d/evaluations.csv ]] || continue
            printf '%-30s %9s %s\n' "${d#$ROOT/runs/}" "$(tail -1 "$d/evaluations.csv" | cut -d, -f1)" \
                "$([[ -f $d/summary.json ]] && echo finished || echo running)"
        done
        exit 0 ;;
    --collect)
        (cd "$ROOT/runs" && find . -name config.json -printf '%h\n') | while read -r run; do
            mkdir -p "$REPO/studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_outputs/$run"
            for name in config.json evaluations.csv plasticity.csv summary.json; do
                [[ -f $ROOT/runs/$run/$name ]] && cp "$ROOT/runs/$run/$name" "$REPO/studies/2026-11-27_why_ppo_does_not_walk_on_ant/short_outputs/$run/"
            done
        done
        exit 0 ;;
    PPO) cmd="python3 $CODE/ppo_continuous.py $COMMON --run-dir $ROOT/runs/PPO/seed{seed}" ;;
    EPPO_ind) cmd="python3 $CODE/eppo_continuous.py --variant ind --kappa 0.01 $COMMON \
--run-dir $ROOT/runs/EPPO_ind_k0.01/seed{seed}" ;;
    *) echo "usage: $0 PPO|EPPO_ind | --status | --collect" >&2; exit 2 ;;
esac
if [[ ! -d $CODE/.git ]]; then
    git clone --quiet --no-checkout "$REPO" "$CODE" && git -C "$CODE" checkout --quiet --detach "$PIN" || {
        echo "error: could not clone $REPO at $PIN into $CODE" >&2; exit 1; }
fi
[[ $(git -C "$CODE" rev-parse HEAD) == "$PIN" ]] || { echo "error: $CODE is not at $PIN" >&2; exit 1; }
mkdir -p "$ROOT/runs"
echo "$(date -Is) start $1: $cmd"
(cd "$CODE" && nice -n 10 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $cmd >>"$ROOT/runs/$1.stdout.log" 2>>"$ROOT/runs/$1.stderr.log")
echo "$(date -Is) end $1: exit $?"
