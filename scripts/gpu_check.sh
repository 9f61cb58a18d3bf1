#!/usr/bin/env bash
# One-shot GPU check, under 8 minutes on a GPU machine with 16 cores:
#   1. every algorithm script (*_continuous.py), tiny, with --cuda at --num-seeds 1 and 4: exit 0 and the expected
#      evaluation rows;
#   2. one tiny CUDA run repeated: identical evaluations.csv (determinism with --torch-deterministic);
#   3. the steps/s table: --num-seeds 16 and 64 on CUDA with every core stepping the simulations (--env-threads 0),
#      and 1 and 4 on the CPU (one thread each), beside the raw simulator's steps/s on one core measured by
#      scripts/benchmark_sps.py in the same process, and the aggregate against (cores x one core's raw simulator):
#      the target is >= 0.6 at --num-seeds 64 on both environments.
#
#   bash scripts/gpu_check.sh [OUT_DIR]      (default: runs/gpu_check; the table is OUT_DIR/table.md)
#
# Environment knobs: GPU_CHECK_STEPS (steps per seed in the benchmarks, default 4096), GPU_CHECK_SEEDS
# (CUDA rows, default "16 64", SEEDS[:ENV_THREADS], 0 threads = all cores), GPU_CHECK_CPU_SEEDS (default "1:1 4:1").
set -u
cd "$(dirname "$0")/.."
out=${1:-runs/gpu_check}
mkdir -p "$out/tiny"
python=${PYTHON:-python3}
steps=${GPU_CHECK_STEPS:-4096}
seeds_list=${GPU_CHECK_SEEDS:-"16 64"}
cpu_seeds_list=${GPU_CHECK_CPU_SEEDS:-"1:1 4:1"}
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # the CPUs this shell may use
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
tiny=(--env-id HalfCheetah-v5 --experiment paralysis --strategy back-one --steps-per-task 256 --num-tasks 2
      --num-steps 128 --minibatch-size 64 --update-epochs 2 --eval-frequency 128 --eval-episodes 2
      --max-episode-steps 50)
expected_rows="0,0 128,0 256,0 384,1 512,1"
status=0

$python -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"

echo "== 1. tiny --cuda runs of every script at --num-seeds 1 and 4 (in parallel)"
pids=()
for script in *_continuous.py; do  # every algorithm script at the repository root (a new method included)
    for k in 1 4; do
        dir="$out/tiny/${script%.py}_k$k"
        rm -rf "$dir"
        method_flags=()  # CB: replace units in the tiny run too
        [[ $script == cb_continuous.py ]] && method_flags=(--maturity-threshold 2 --replacement-rate 0.05)
        $python "$script" "${tiny[@]}" "${method_flags[@]}" --cuda --num-seeds "$k" --run-dir "$dir/seed{seed}" \
            >"$dir.log" 2>&1 &
        pids+=("$!:$script:$k:$dir")
    done
done
for entry in "${pids[@]}"; do
    IFS=: read -r pid script k dir <<<"$entry"
    wait "$pid"; rc=$?
    rows=$(for s in $(seq 1 "$k"); do tail -n +2 "$dir/seed$s/evaluations.csv" 2>/dev/null | cut -d, -f1,2 | tr '\n' ' '; echo; done | sort -u)
    device=$(grep -o '"device": "[a-z]*"' "$dir/seed1/summary.json" 2>/dev/null)
    if [[ $rc -eq 0 && "$rows" == "$expected_rows " && $device == *cuda* ]]; then
        echo "ok    $script --num-seeds $k ($device)"
    else
        echo "FAIL  $script --num-seeds $k: exit $rc, rows '$rows', $device (log $dir.log)"; tail -5 "$dir.log"; status=1
    fi
done

echo "== 2. determinism: the same tiny CUDA run twice"
for attempt in a b; do
    rm -rf "$out/repeat_$attempt"
    $python eppo_continuous.py "${tiny[@]}" --cuda --num-seeds 4 --run-dir "$out/repeat_$attempt/seed{seed}" >/dev/null 2>&1
done
if cmp -s "$out/repeat_a/seed3/evaluations.csv" "$out/repeat_b/seed3/evaluations.csv"; then
    echo "ok    eppo_continuous.py --cuda --num-seeds 4: identical evaluations.csv"
else
    echo "DIFF  eppo_continuous.py --cuda --num-seeds 4: evaluations differ between two identical runs"; status=1
fi

echo "== 3. steps/s ($steps steps per seed, --experiment none; raw = the bare simulator in the same process)"
table="$out/table.md"
echo "| env | device | seeds | env threads | train steps/s (all seeds) | per seed | raw simulator steps/s (1 core) | train / raw | train / ($cores cores x raw) |" >"$table"
echo "|---|---|---|---|---|---|---|---|---|" >>"$table"
bench() {  # env device seeds[:env_threads] -> one table row (env threads 0: all cores)
    local env=$1 device=$2 k=${3%%:*} threads=0 flag
    [[ $3 == *:* ]] && threads=${3#*:}
    [[ $device == cuda ]] && flag=--cuda || flag=--no-cuda
    local text
    text=$($python scripts/benchmark_sps.py ppo_continuous.py --env-id "$env" --steps "$steps" --raw-steps 10000 \
        --num-seeds "$k" -- "$flag" --env-threads "$threads" --eval-episodes 2 2>/dev/null)
    local raw train per_seed
    raw=$(sed -n 's/^raw env SPS *\([0-9,]*\).*/\1/p' <<<"$text")
    train=$(sed -n 's/^train SPS *\([0-9,]*\) in aggregate.*/\1/p' <<<"$text")
    per_seed=$(sed -n 's/.*aggregate, \([0-9,]*\) per seed.*/\1/p' <<<"$text")
    ratio=$(sed -n 's/^train \/ raw *\([0-9.]*\).*/\1/p' <<<"$text")
    local ran_on of_cores
    ran_on=$(sed -n 's/^seeds .* in one process on \([a-z]*\).*/\1/p' <<<"$text")  # the device it really used
    of_cores=$($python -c "print(f'{int(\"${train:-0}\".replace(\",\", \"\")) / ($cores * int(\"${raw:-1}\".replace(\",\", \"\"))):.2f}')")
    echo "| $env | ${ran_on:-$device} | $k | ${threads/#0/all ($cores)} | ${train:-FAILED} | $per_seed | $raw | $ratio | $of_cores |"
}
# CPU rows run side by side (one thread each); CUDA rows one after another (one GPU, every core)
cpu_rows=()
for env in HalfCheetah-v5 Ant-v5; do
    for k in $cpu_seeds_list; do
        bench "$env" cpu "$k" >"$out/row_cpu_${env}_${k/:/_}" &
        cpu_rows+=("$out/row_cpu_${env}_${k/:/_}")
    done
done
for env in HalfCheetah-v5 Ant-v5; do
    for k in $seeds_list; do
        bench "$env" cuda "$k" | tee -a "$table"
    done
done
wait
cat "${cpu_rows[@]}" | tee -a "$table"
echo "table: $table"
exit $status
