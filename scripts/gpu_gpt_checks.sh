#!/usr/bin/env bash
# The GPT checks on a GPU machine, from a folder made by scripts/pack_gpu_run.sh (sublet and
# test_gpt_torch_parity at least), with a python3 that has PyTorch 2.x:
#   scripts/gpu_gpt_checks.sh PACK OUT [CORPUS] [STEPS]
# 1. parity: 20 AdamW steps of gpt-mini in float32 (TF32 off) against nanoGPT's model in PyTorch,
#    with attention written out and with SDPA;
# 2. gpt2-small, batch 16 x 1024, bf16: sublet's step, PyTorch eager and torch.compile, one after
#    the other on the same card;
# 3. gpt-mini trained on CORPUS (default: the default corpus) for STEPS steps (default 2000) in
#    bf16, then `sublet generate` from its checkpoint.
# Logs and JSON go to OUT; the summary lines to stdout.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PACK OUT [CORPUS] [STEPS]" >&2; exit 2; }
pack="$(cd "$1" && pwd)"; out="$(mkdir -p "$2" && cd "$2" && pwd)"
corpus="${3:-/usr/share/doc/python3.11/html/_sources}"; steps="${4:-2000}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${SUBLET_TORCH_PYTHON:-python3}"
sublet="$pack/sublet"
export SUBLET_REQUIRE_GPU=1
scratch="$(mktemp -d)"  # checkpoints stay out of OUT: they are large
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
"$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >> "$out/gpu.txt" 2>&1

for attention in manual sdpa; do
  SUBLET_PARITY_DEVICE=cuda SUBLET_PARITY_ATTENTION=$attention SUBLET_TORCH_PYTHON="$python" \
    SUBLET_GPT_PARITY_SCRIPT="$repo/tests/models/gpt_torch_parity.py" \
    timeout 300 "$pack/tests/test_gpt_torch_parity" > "$out/parity_$attention.log" 2>&1
  echo "parity ($attention attention) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/parity_$attention.log" | tr '\n' ' ')"
  grep -E "largest|step 19:" "$out/parity_$attention.log" | head -3
done

shape=(--model gpt2-small --batch-size 16 --seq-len 1024 --precision bf16 --steps 20 --warmup 5)
timeout 300 "$sublet" bench step --device cuda "${shape[@]}" --json "$out/gpt2_small_sublet.json" \
  > "$out/gpt2_small_sublet.log" 2>&1
echo "gpt2-small sublet rc=$?"; tail -4 "$out/gpt2_small_sublet.log"
for mode in eager compile; do
  flag=(); [ $mode = compile ] && flag=(--compile)
  timeout 400 "$python" "$repo/bench/pytorch_step.py" --device cuda "${shape[@]}" "${flag[@]}" \
    --json "$out/gpt2_small_torch_$mode.json" > "$out/gpt2_small_torch_$mode.log" 2>&1
  echo "gpt2-small pytorch $mode rc=$?"; tail -3 "$out/gpt2_small_torch_$mode.log"
done

timeout 400 "$sublet" train --device cuda --model gpt-mini --data text --data-dir "$corpus" --steps "$steps" \
  --precision bf16 --metrics-json "$out/gpt_mini_train.json" --checkpoint "$scratch/gpt_mini.safetensors" \
  > "$out/gpt_mini_train.log" 2>&1
echo "gpt-mini train rc=$?"; grep -E "^training|^step|^final" "$out/gpt_mini_train.log" | tail -6
for prompt in "The allocator" "def main():"; do
  timeout 60 "$sublet" generate --device cuda --checkpoint "$scratch/gpt_mini.safetensors" --prompt "$prompt" \
    --tokens 300 --seed 1 >> "$out/gpt_mini_generate.txt" 2>&1
  echo "generate rc=$?"
done
head -c 1500 "$out/gpt_mini_generate.txt"; echo
rm -rf "$scratch"
