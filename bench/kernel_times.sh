#!/usr/bin/env bash
# Kernel times of one training step, sublet and PyTorch side by side in one job, under Nsight
# Compute (ncu reads each kernel's duration; both programs mark their timed steps with
# --profile-range). bench/ncu_kernel_table.py groups them.
#   bench/kernel_times.sh OUT_DIR TAG [bench step flags, e.g. --model resnet50 --input 3x224x224 ...]
# SUBLET: the sublet binary (default build/sublet). PYTHON: a Python with torch (default python3).
# NCU_CACHE_CONTROL: all (default: ncu flushes the caches before each kernel, so a kernel's time
# does not depend on the one before) or none (the caches as the step left them: closer to the
# kernels' times inside the running step, where a layer reads what the one before just wrote).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$1"; tag="$2"; shift 2
mkdir -p "$out"
sublet="${SUBLET:-$here/../build/sublet}"
python="${PYTHON:-python3}"
cache_control="${NCU_CACHE_CONTROL:-all}"
[[ "$cache_control" == all || "$cache_control" == none ]] || {
  echo "error: NCU_CACHE_CONTROL must be all or none, found '$cache_control'" >&2; exit 1; }
ncu=(ncu --profile-from-start off --clock-control none --cache-control "$cache_control" --metrics gpu__time_duration.sum --csv --page raw)
common=(--device cuda --steps 1 --warmup 3 --profile-range "$@")
"${ncu[@]}" "$sublet" bench step "${common[@]}" > "$out/${tag}_sublet.csv" 2> "$out/${tag}_sublet.err"
echo "sublet ncu rc=$?"
"${ncu[@]}" "$python" "$here/pytorch_step.py" "${common[@]}" > "$out/${tag}_pytorch.csv" 2> "$out/${tag}_pytorch.err"
echo "pytorch ncu rc=$?"
for side in sublet pytorch; do
  python3 "$here/ncu_kernel_table.py" "$out/${tag}_${side}.csv" --label "$tag $side" --json "$out/${tag}_${side}.json" \
    > "$out/${tag}_${side}.txt" 2>&1
  cat "$out/${tag}_${side}.txt"
done
