#!/usr/bin/env bash
# The ObjectRL study: ObjectRL's PPO (objectrl_ppo.py, the study's environment from install.sh) and our PPO with the
# rebuild flags. Phase 1: Ant-v5 and HalfCheetah-v5 paralysis back-one, the first 2 tasks (1 M steps), seeds 1-3;
# then the full-length runs (9 tasks, seeds 1-5) that the README's rule calls for.
# Two lanes at a time (one per core) under nice 19; the runs live outside the work tree and resume across sessions.
#
#   bash studies/2026-12-07_objectrl_ppo/launch.sh            # start or resume every unfinished run, in the background
#   bash studies/2026-12-07_objectrl_ppo/launch.sh --status   # steps done per run
#   bash studies/2026-12-07_objectrl_ppo/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash studies/2026-12-07_objectrl_ppo/launch.sh --collect  # the small outputs into this folder's outputs/
#   bash studies/2026-12-07_objectrl_ppo/launch.sh --stash    # after --stop: the resume points into resume/, to commit
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(git -C "$HERE" rev-parse --show-toplevel)
# every run of phase 1, ObjectRL's and ours, on this commit (the adapter, its tests; the scripts as at 8c9228c)
PIN=${OBJECTRL_STUDY_PIN:-888ff49718298b79c222d996c4a316e98274eb2a}
ROOT=${OBJECTRL_STUDY_ROOT:-/work/objectrl_ppo}
CODE=$ROOT/code
RUNS=$ROOT/runs
OUTPUTS=$HERE/outputs
STORE=$HERE/resume
OBJECTRL_PYTHON=${OBJECTRL_VENV:-$HERE/.venv}/bin/python
RESUME_STORE=$HERE/../2026-11-26_paper_length_v0.1_defaults/resume_store.py
STEPS_PER_TASK=500000
NUM_TASKS=2
# docs/ppo.md's rebuild of ObjectRL's choices, with --log-std-init 0: ObjectRL's log std parameter starts at 0 and
# its clamp at -1 holds it there with no gradient; from our default -1 the clamp would let it learn downwards
REBUILD_FLAGS="--layer-norm plain --init torch --log-std-init 0 --log-std-max -1 --no-norm-obs --no-norm-reward"
# the rebuild with ObjectRL's two choices that no flag of PIN covers, one at a time and together (docs/ppo.md), on a
# commit that has their flags (its scripts give PIN's outputs bit for bit without them)
PIN_CHOICES=${OBJECTRL_STUDY_PIN_CHOICES:-f1c96062871ec9e4d1ff6bc395c94fe30af4c527}
CODE_CHOICES=$ROOT/code-choices
declare -A CHOICE_FLAGS=([PPO_objectrl_noshuffle]="--no-shuffle-minibatches"
                         [PPO_objectrl_gaetrunc]="--gae-across-truncations"
                         [PPO_objectrl_both]="--no-shuffle-minibatches --gae-across-truncations")
# ObjectRL's PPO on the adapter that evaluates by our protocol (the action clipped to the bounds; ObjectRL's own
# unclipped return beside it). Its runs on PIN evaluated the unclipped action alone: kept in
# outputs_unclipped_evaluation/, rerun here (their training is the same: the evaluation leaves the RNGs as they were)
PIN_OBJECTRL=${OBJECTRL_STUDY_PIN_OBJECTRL:-ee76da967ea2a919a6e072809d59812bbec999a4}
CODE_OBJECTRL=$ROOT/code-objectrl
# lanes of jobs "METHOD:ENV:FIRST_SEED[:SEEDS[:TASKS]]", run in order (TASKS 2, phase 1, unless given; a job of
# all 9 tasks is a full-length run of the rule, in $RUNS/full-length). Phase 1 has both lanes: ObjectRL's runs,
# HalfCheetah's first (the rule for full-length runs reads them), after our rebuild's runs (fast, first). Its
# HalfCheetah reading (0.76 x ours, below 0.85) calls for HalfCheetah at full length, seeds 1-5: lane 1 runs them
# after phase 1; lane 2 ends with phase 1 and its core goes to the slippery study (PAPER_LENGTH_WORKERS=1).
LANES=(
    "PPO_objectrl_flags:Ant:1:3 PPO_objectrl_flags:HalfCheetah:1:3 PPO_objectrl_noshuffle:HalfCheetah:1:3
     PPO_objectrl_gaetrunc:HalfCheetah:1:3 ObjectRL_PPO:HalfCheetah:1 ObjectRL_PPO:HalfCheetah:3 ObjectRL_PPO:Ant:2
     ObjectRL_PPO:Ant:3 ObjectRL_PPO:HalfCheetah:1:1:9 ObjectRL_PPO:HalfCheetah:2:1:9 ObjectRL_PPO:HalfCheetah:3:1:9
     ObjectRL_PPO:HalfCheetah:4:1:9 ObjectRL_PPO:HalfCheetah:5:1:9"
    "PPO_objectrl_noshuffle:Ant:1:3 PPO_objectrl_both:HalfCheetah:1:3 PPO_objectrl_gaetrunc:Ant:1:3
     PPO_objectrl_both:Ant:1:3 ObjectRL_PPO:HalfCheetah:2 ObjectRL_PPO:Ant:1"
)
RUNNING="^bash $HERE/launch.sh --lane"

generic() {  # the v0.1 study's launcher for the modes that only read or copy run directories
    PAPER_LENGTH_ROOT=$ROOT PAPER_LENGTH_OUTPUTS=$OUTPUTS PAPER_LENGTH_STORE=$STORE \
        bash "$HERE/../2026-11-26_paper_length_v0.1_defaults/launch.sh" "$@"
}

run_job() {  # METHOD ENV FIRST_SEED [SEEDS [TASKS]]: one process, resumed from its checkpoint if it has one
    local method=$1 env=$2 seed=$3 seeds=${4:-1} tasks=${5:-$NUM_TASKS}
    local dir=$RUNS/paralysis/$env/back-one/$method
    ((tasks == NUM_TASKS)) || dir=$RUNS/full-length/paralysis/$env/back-one/$method
    local common=(--env-id "$env-v5" --experiment paralysis --strategy back-one --steps-per-task $STEPS_PER_TASK
                  --num-tasks "$tasks" --eval-frequency 20000 --eval-episodes 10 --seed "$seed")
    mkdir -p "$dir/seed$seed"
    if [[ $method == ObjectRL_PPO ]]; then
        [[ -f $dir/seed$seed/summary.json ]] && return 0
        nice -n 19 "$OBJECTRL_PYTHON" "$CODE_OBJECTRL/studies/2026-12-07_objectrl_ppo/objectrl_ppo.py" "${common[@]}" \
            --run-dir "$dir/seed$seed" >>"$dir/seed$seed/stdout.log" 2>&1
    else
        [[ -f $dir/seed$((seed + seeds - 1))/summary.json ]] && return 0
        local code=$CODE
        [[ $method == PPO_objectrl_flags ]] || code=$CODE_CHOICES
        # shellcheck disable=SC2086
        nice -n 19 python3 "$code/ppo_continuous.py" "${common[@]}" --num-seeds "$seeds" $REBUILD_FLAGS \
            ${CHOICE_FLAGS[$method]:-} --exp-name "$method" --torch-threads 1 --env-threads 1 \
            --run-dir "$dir/seed{seed}" >>"$dir/seed$seed/stdout.log" 2>&1
    fi
}

case ${1:-} in
    --status|--collect) generic "$1"; exit ;;
    --lane)
        cd "$CODE" || exit 1
        for job in $2; do
            IFS=: read -r -a fields <<<"$job"
            echo "[lane $(date '+%F %T')] $job"
            run_job "${fields[@]}"
            rc=$?
            ((rc == 0)) || { echo "[lane $(date '+%F %T')] $job stopped (exit $rc)"; exit "$rc"; }
        done
        echo "[lane $(date '+%F %T')] done"; exit 0 ;;
    --stash)
        if pgrep -f "$RUNNING" >/dev/null; then
            echo "error: runs are still running; --stop them first (each writes a checkpoint), then --stash" >&2; exit 2
        fi
        generic --stash; exit ;;
    --stop)
        script="(studies/2026-12-07_objectrl_ppo/objectrl_ppo|ppo_continuous)\\.py"
        pkill -TERM -f "$ROOT/code(-choices|-objectrl)?/$script" ||
            echo "no run running"
        exit 0 ;;
    "") ;;
    *) echo "usage: $0 [--status | --stop | --collect | --stash]" >&2; exit 2 ;;
esac

if pgrep -f "$RUNNING" >/dev/null; then
    echo "already running:"; generic --status; exit 0
fi
[[ -x $OBJECTRL_PYTHON ]] || {
    echo "error: no ObjectRL environment at $OBJECTRL_PYTHON; run install.sh first" >&2; exit 1; }
if [[ ! -d $CODE/.git ]]; then
    git clone --quiet --no-checkout "$REPO" "$CODE" && git -C "$CODE" checkout --quiet --detach "$PIN" || {
        echo "error: could not clone $REPO at $PIN into $CODE" >&2; exit 1; }
fi
[[ $(git -C "$CODE" rev-parse HEAD) == "$PIN" ]] || { echo "error: $CODE is not at $PIN" >&2; exit 1; }
for pinned in "$CODE_CHOICES $PIN_CHOICES" "$CODE_OBJECTRL $PIN_OBJECTRL"; do
    read -r code pin <<<"$pinned"
    if [[ ! -d $code/.git ]]; then
        git clone --quiet --no-checkout "$REPO" "$code" && git -C "$code" checkout --quiet --detach "$pin" || {
            echo "error: could not clone $REPO at $pin into $code" >&2; exit 1; }
    fi
    [[ $(git -C "$code" rev-parse HEAD) == "$pin" ]] || { echo "error: $code is not at $pin" >&2; exit 1; }
done
mkdir -p "$RUNS"
echo "[launch $(date '+%F %T')] code $PIN, runs in $RUNS" >>"$ROOT/launch.log"
python3 "$RESUME_STORE" restore "$RUNS" "$STORE" "$OUTPUTS" | sed 's/^/[restore] /' | tee -a "$ROOT/launch.log"
((PIPESTATUS[0] == 0)) || { echo "error: could not restore from $STORE and $OUTPUTS" >&2; exit 1; }
for lane in "${LANES[@]}"; do
    nohup bash "$HERE/launch.sh" --lane "$lane" >>"$ROOT/launch.log" 2>&1 </dev/null &
done
echo "started ${#LANES[@]} lanes in the background; log: $ROOT/launch.log"
