#!/usr/bin/env bash
# The GPU training-step suite in one command: for ResNet-18 32x32 batch 128 and 512
# (10 classes) and ResNet-50 224x224 batch 64 (1000 classes), fp32, torchvision's architectures,
# random data, median of 30 steps after 5 warm-up steps:
#   sublet eager, sublet with the step captured in a CUDA graph, PyTorch (bench/pytorch_step.py,
#   cudnn.benchmark on) eager and with its step captured in a CUDA graph, and `--allocator all`
#   (caching | raw | async side by side) for ResNet-18 batch 128 and ResNet-50 batch 64.
# Every run writes JSON into OUT_DIR; bench/gpu_step_table.py then prints one table with ratios.
# SUITE=amp runs the mixed-precision rows instead (the same four runs each): ResNet-50 224x224
# batch 64 and 256 in bf16 and fp16 with channels-last, and ResNet-18 32x32 batch 128 fp32
# channels-last; bench/gpu_amp_table.py prints their table and goals. SUITE=all runs both.
#
#   [SUITE=fp32|amp|all] bench/gpu_step_suite.sh OUT_DIR
#
# SUBLET: the sublet binary (default: build-gpu/sublet, else build/sublet). PYTHON: a Python with
# torch (default: the first of python3, /usr/bin/python3 that imports it). STEPS/WARMUP override
# 30/5. A failing run is reported and the suite goes on (its JSON is then missing from the table).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -eq 1 ]] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
out="$1"
mkdir -p "$out" || exit 1
sublet="${SUBLET:-}"
if [[ -z "$sublet" ]]; then
  for candidate in "$here/../build-gpu/sublet" "$here/../build/sublet"; do
    [[ -x "$candidate" ]] && { sublet="$candidate"; break; }
  done
fi
[[ -x "$sublet" ]] || { echo "error: no sublet binary (set SUBLET=path/to/sublet)" >&2; exit 1; }
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import torch" 2>/dev/null; then python="$candidate"; break; fi
  done
fi
steps="${STEPS:-30}"
warmup="${WARMUP:-5}"
failures=0

run() {  # run NAME COMMAND...
  local name="$1"; shift
  echo "=== $name: $*" >&2
  if ! "$@" > "$out/$name.log" 2>&1; then
    echo "!!! $name failed (see $out/$name.log):" >&2
    tail -5 "$out/$name.log" >&2
    failures=$((failures + 1))
  fi
}

suite="${SUITE:-fp32}"
case "$suite" in fp32|amp|all) ;; *) echo "error: SUITE='$suite': expected fp32, amp or all" >&2; exit 2 ;; esac
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>/dev/null || true

# run_four TAG MODEL INPUT BATCH CLASSES [EXTRA FLAGS...]: sublet eager and graph, PyTorch eager and graph.
run_four() {
  local tag="$1" model="$2" input="$3" batch="$4" classes="$5"; shift 5
  local common=(--device cuda --model "$model" --input "$input" --batch-size "$batch" --classes "$classes"
                --steps "$steps" --warmup "$warmup" "$@")
  run "${tag}_sublet_eager" "$sublet" bench step "${common[@]}" --json "$out/${tag}_sublet_eager.json"
  run "${tag}_sublet_graph" "$sublet" bench step "${common[@]}" --cuda-graph --json "$out/${tag}_sublet_graph.json"
  if [[ -n "$python" ]]; then
    run "${tag}_pytorch" "$python" "$here/pytorch_step.py" "${common[@]}" --json "$out/${tag}_pytorch.json"
    run "${tag}_pytorch_graph" "$python" "$here/pytorch_step.py" "${common[@]}" --cuda-graph \
        --json "$out/${tag}_pytorch_graph.json"
  else
    echo "!!! no python3 with torch: PyTorch runs skipped (set PYTHON=...)" >&2
  fi
}

if [[ "$suite" != amp ]]; then
  configs=(
    "r18_b128 resnet18 3x32x32 128 10"
    "r18_b512 resnet18 3x32x32 512 10"
    "r50_b64 resnet50 3x224x224 64 1000"
  )
  for config in "${configs[@]}"; do
    read -r tag model input batch classes <<< "$config"
    run_four "$tag" "$model" "$input" "$batch" "$classes"
    if [[ "$tag" != r18_b512 ]]; then
      run "${tag}_sublet_allocators" "$sublet" bench step --device cuda --model "$model" --input "$input" \
          --batch-size "$batch" --classes "$classes" --steps "$steps" --warmup "$warmup" --allocator all \
          --json "$out/${tag}_sublet_allocators.json"
    fi
  done
  python3 "$here/gpu_step_table.py" "$out" | tee "$out/table.txt"
fi
if [[ "$suite" != fp32 ]]; then
  amp_configs=(
    "r50_b64_bf16_cl resnet50 3x224x224 64 1000 bf16"
    "r50_b256_bf16_cl resnet50 3x224x224 256 1000 bf16"
    "r50_b64_fp16_cl resnet50 3x224x224 64 1000 fp16"
    "r50_b256_fp16_cl resnet50 3x224x224 256 1000 fp16"
    "r18_b128_fp32_cl resnet18 3x32x32 128 10 fp32"
  )
  for config in "${amp_configs[@]}"; do
    read -r tag model input batch classes precision <<< "$config"
    run_four "$tag" "$model" "$input" "$batch" "$classes" --precision "$precision" --channels-last
  done
  python3 "$here/gpu_amp_table.py" "$out" | tee "$out/amp_table.txt"
fi
echo "JSON, logs and table.txt in $out; $failures run(s) failed" >&2
exit $((failures > 0))
