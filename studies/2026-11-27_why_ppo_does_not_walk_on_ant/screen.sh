#!/usr/bin/env bash
# The screen: our PPO on the unchanged Ant-v5, seeds 1001-1003 (grid-search seeds, never reported as
# results), one --num-seeds 3 process per configuration, run one after another in this process (one core).
#
#   bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/screen.sh STEPS NAME...   # run the configurations NAME (rows of configs.tsv) in order
#   bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/screen.sh --status        # steps done per run
#   SCREEN_ENV=HalfCheetah-v5 ANT_WALK_ROOT=/work/ant_walk_halfcheetah bash studies/2026-11-27_why_ppo_does_not_walk_on_ant/screen.sh 1000000 NAME...
#                                                # the same configurations on stationary HalfCheetah-v5 (the HalfCheetah check)
#
# Runs live outside the work tree in $ROOT/runs/<steps>/<name>/seed<k> (default ROOT /work/ant_walk) and run the
# code of the pinned commit PIN, exported into $ROOT/code once (code.sha256 lists its files), so later commits on
# main never change a run half-way. A finished run exits at once (summary.json), an unfinished one resumes from
# its checkpoint. (The first session's $ROOT/code was a copy of the work tree just before PIN: for these flags
# the same computation, checked in README.md.)
set -u
PIN=5a2f5c1f961d948adefb41ae2f815f790685e18b
ROOT=${ANT_WALK_ROOT:-/work/ant_walk}
ENV_ID=${SCREEN_ENV:-Ant-v5}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")" && git rev-parse --show-toplevel)
CODE=$ROOT/code
if [[ ${1:-} == --status ]]; then
    for d in "$ROOT"/runs/*/*/seed*; do
        [[ -f $d/evaluations.csv ]] || continue
        printf '%-45s %9s %s\n' "${d#$ROOT/runs/}" "$(tail -1 "$d/evaluations.csv" | cut -d, -f1)" \
            "$([[ -f $d/summary.json ]] && echo finished || echo running)"
    done
    exit 0
fi
steps=$1; shift
if [[ ! -d $CODE ]]; then
    mkdir -p "$CODE"
    git -C "$REPO" archive "$PIN" ppo_continuous.py nonstationary_envs.py plasticity_metrics.py | tar -x -C "$CODE"
    (cd "$CODE" && sha256sum ./*.py > code.sha256)
fi
for name in "$@"; do
    flags=$(awk -F'\t' -v n="$name" '$1 == n {print $2}' "$REPO/studies/2026-11-27_why_ppo_does_not_walk_on_ant/configs.tsv")
    if ! grep -q "^$name	" "$REPO/studies/2026-11-27_why_ppo_does_not_walk_on_ant/configs.tsv"; then
        echo "no configuration $name in configs.tsv" >&2; exit 2
    fi
    run_dir="$ROOT/runs/$steps/$name/seed{seed}"
    cmd="python $CODE/ppo_continuous.py --env-id $ENV_ID --experiment none --steps-per-task $steps --seed 1001 --num-seeds 3 --env-threads 1 --torch-threads 1 --run-dir $run_dir $flags"
    echo "$(date -Is) start $name: $cmd"
    mkdir -p "$ROOT/runs/$steps/$name"
    (cd "$CODE" && nice -n 10 env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $cmd > "$ROOT/runs/$steps/$name/stdout.log" 2> "$ROOT/runs/$steps/$name/stderr.log")
    echo "$(date -Is) end $name: exit $?"
done
