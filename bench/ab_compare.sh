#!/usr/bin/env bash
# Two sublet binaries (before and after a change) timed on one machine in one job, alternating,
# so that host drift falls on both alike: `bench alloc` and `bench step` (ResNet-18 32x32 bs128
# eager and CUDA-graph, ResNet-50 224x224 bs64 eager), ROUNDS times A then B. Every run writes
# JSON into OUT_DIR; bench/ab_table.py prints the medians side by side with B/A ratios.
#
#   bench/ab_compare.sh OLD_SUBLET NEW_SUBLET OUT_DIR [DEVICE]     (DEVICE: cuda (default) or cpu)
#
# ROUNDS (default 2), ALLOC_ROUNDS (bench alloc --rounds, default 3), ALLOC_REPETITIONS (bench
# alloc --repetitions, default its own), STEPS (default 30), ALLOC_ONLY=1 (bench alloc alone),
# STEP_SET=structure (no bench alloc; the captured steps a change to the step's structure must keep:
# ResNet-18 32x32 bs128 fp32 and ResNet-50 224x224 bs256 bf16, channels-last, CUDA graph; use
# ROUNDS=5).
set -uo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 OLD_SUBLET NEW_SUBLET OUT_DIR [cuda|cpu]" >&2; exit 2; }
old="$1"; new="$2"; out="$3"; device="${4:-cuda}"
mkdir -p "$out" || exit 1
rounds="${ROUNDS:-2}"; alloc_rounds="${ALLOC_ROUNDS:-3}"; steps="${STEPS:-30}"
alloc_extra=(); [[ -n "${ALLOC_REPETITIONS:-}" ]] && alloc_extra=(--repetitions "$ALLOC_REPETITIONS")
failures=0
run() {  # run NAME COMMAND...
  local name="$1"; shift
  echo "=== $name" >&2
  "$@" > "$out/$name.log" 2>&1 || { echo "!!! $name failed:" >&2; tail -5 "$out/$name.log" >&2; failures=$((failures + 1)); }
}
if [[ "${ALLOC_ONLY:-0}" == 1 ]]; then
  steps_cfg=()
elif [[ "${STEP_SET:-}" == structure ]]; then
  steps_cfg=("r18_b128_fp32_cl_graph resnet18 3x32x32 128 10 --precision fp32 --channels-last --cuda-graph"
             "r50_b256_bf16_cl_graph resnet50 3x224x224 256 1000 --precision bf16 --channels-last --cuda-graph")
elif [[ "$device" == cuda ]]; then
  steps_cfg=("r18_b128 resnet18 3x32x32 128 10" "r18_b128_graph resnet18 3x32x32 128 10 --cuda-graph" "r50_b64 resnet50 3x224x224 64 1000")
else
  steps_cfg=("r20_b128 resnet20 1x28x28 128 10")
fi
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    bin="$old"; [[ "$side" == B ]] && bin="$new"
    [[ "${STEP_SET:-}" == structure ]] ||
      run "alloc_${side}_${round}" "$bin" bench alloc --device "$device" --rounds "$alloc_rounds" "${alloc_extra[@]}" --json "$out/alloc_${side}_${round}.json"
    for cfg in ${steps_cfg[@]+"${steps_cfg[@]}"}; do
      set -- $cfg
      name="$1"; shift
      run "step_${name}_${side}_${round}" "$bin" bench step --device "$device" --model "$1" --input "$2" --batch-size "$3" \
        --classes "$4" "${@:5}" --steps "$steps" --warmup 5 --json "$out/step_${name}_${side}_${round}.json"
    done
  done
done
python3 "$(dirname "$0")/ab_table.py" "$out" | tee "$out/ab_table.txt"
exit "$failures"
