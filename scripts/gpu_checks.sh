#!/usr/bin/env bash
# Everything the GPU acceptance asks for, in one go, on a machine with an NVIDIA GPU:
#   scripts/gpu_checks.sh BUILD_DIR OUT_DIR [tests|train|bench|profile|all]...
# BUILD_DIR is a CUDA build (tests and build/sublet); results and logs go to OUT_DIR.
# Needs data/mnist (scripts/fetch_mnist.sh) for the training run, python3 with torch for the
# PyTorch baselines.
set -uo pipefail
# A GPU test that finds no GPU fails here instead of skipping (tests/gpu_skip.h).
export SUBLET_REQUIRE_GPU=1
build="$(cd "$1" && pwd)"; out="$2"; shift 2
parts=("${@:-all}")
mkdir -p "$out"
want() { for p in "${parts[@]}"; do [ "$p" = all ] || [ "$p" = "$1" ] && return 0; done; return 1; }
sublet="$build/sublet"

if want tests; then
  echo "== GPU tests (every test binary with a gpu-labelled case)"
  failed=0
  for t in $(find "$build/tests" -maxdepth 2 -type f -perm -u+x -name 'test_*' | sort); do
    name=$(basename "$t")
    "$t" --gtest_brief=1 > "$out/gtest_$name.log" 2>&1 || { failed=1; echo "FAILED: $name"; tail -20 "$out/gtest_$name.log"; }
    grep -hE "^\[  (PASSED|FAILED|SKIPPED) " "$out/gtest_$name.log" | sed "s/^/$name: /" | head -3
  done > "$out/tests_summary.txt"
  grep -E "FAILED|SKIPPED" "$out/tests_summary.txt" | head -40
  echo "test binaries with failures: $(grep -c 'FAILED:' "$out/tests_summary.txt")"
fi

if want train; then
  echo "== sublet train (defaults: resnet20 on all 8,000/2,000 MNIST digits)"
  "$sublet" train --epochs 10 --metrics-json "$out/train_mnist.json" --checkpoint "$out/train_mnist.ckpt" > "$out/train_mnist.log" 2>&1
  echo "rc=$?"; grep -E "^epoch|test acc|error" "$out/train_mnist.log" | tail -12
  echo "== sublet train resnet56 on synthetic 32x32x3"
  "$sublet" train --model resnet56 --data synthetic --synthetic-shape 3x32x32 --epochs 2 \
    --metrics-json "$out/train_resnet56.json" > "$out/train_resnet56.log" 2>&1
  echo "rc=$?"; grep -E "^epoch|error" "$out/train_resnet56.log" | tail -4
fi

if want bench; then
  echo "== sublet bench alloc"
  # The torch column: a plugin built against this machine's PyTorch (python3 on PATH).
  torch_plugin=()
  if "$(dirname "$0")/build_torch_plugin.sh" "$out/libsublet_torch_bench.so" > "$out/torch_plugin_build.log" 2>&1; then
    torch_plugin=(--torch-plugin "$out/libsublet_torch_bench.so")
  else
    echo "no torch column: scripts/build_torch_plugin.sh failed ($out/torch_plugin_build.log):"; tail -3 "$out/torch_plugin_build.log"
  fi
  "$sublet" bench alloc --device cuda "${torch_plugin[@]}" --json "$out/bench_alloc.json" --svg "$out/bench_alloc.svg" \
    > "$out/bench_alloc.txt" 2>&1
  echo "rc=$?"; cat "$out/bench_alloc.txt" | tail -30
  echo "== sublet bench step vs PyTorch"
  for cfg in "resnet18 3x32x32 128 10" "resnet18 3x32x32 512 10" "resnet50 3x224x224 64 1000"; do
    set -- $cfg
    "$sublet" bench step --device cuda --model "$1" --input "$2" --batch-size "$3" --classes "$4" --steps 30 --warmup 5 \
      --json "$out/step_sublet_$1_$3.json" 2>&1 | tail -3
    python3 "$(dirname "$0")/../bench/pytorch_step.py" --device cuda --model "$1" --input "$2" --batch-size "$3" \
      --classes "$4" --steps 30 --warmup 5 --json "$out/step_torch_$1_$3.json" 2>&1 | tail -3
  done
fi

if want profile; then
  echo "== sublet profile resnet18 bs128 (GPU)"
  "$sublet" profile --model resnet18 --batch-size 128 --device cuda --out "$out/profile_resnet18" > "$out/profile.log" 2>&1
  echo "rc=$?"; tail -25 "$out/profile.log"
fi
