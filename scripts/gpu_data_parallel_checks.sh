#!/usr/bin/env bash
# Data parallel on the GPU machine (one GPU is enough), from a folder made by
# scripts/pack_gpu_run.sh (the sublet binary, the Gloo shim and its libraries):
#   scripts/gpu_data_parallel_checks.sh PACK OUT [TORCHRUN]
# Runs one process as the reference, `--backend gloo --device cuda --nproc-per-node 2` (two
# processes sharing the GPU through pinned host memory), the same under torchrun (its agent
# store on MASTER_PORT), and torchrun with NCCL at one rank per GPU; packs every log, metrics
# file and checkpoint into OUT/data_parallel.tar.gz (one file: the device tool brings few back),
# folder dp/ inside. Compare the
# checkpoints with build/tests/train/checkpoint_difference afterwards (the metrics' num_sync_all_streams
# is num_sync_all_streams summed over ranks: 0 expected).
set -uo pipefail
pack="$(cd "$1" && pwd)"
final="$2"
torchrun="${3:-/opt/torch/.venv/bin/torchrun}"
out="$(mktemp -d)"
mkdir -p "$out/dp" "$final"
sublet="$pack/sublet"
common=(train --model resnet20 --data synthetic --synthetic-shape 3x8x8 --limit-train 120 --limit-test 6 --epochs 1
        --lr 0.02 --device cuda --dist-timeout 60)
run() {  # name, command...
  local name="$1"; shift
  echo "== $name: $*" | tee "$out/dp/$name.log"
  ( time timeout 300 "$@" ) >> "$out/dp/$name.log" 2>&1
  echo "exit status $?" | tee -a "$out/dp/$name.log"
}
nvidia-smi -L > "$out/dp/gpu.txt" 2>&1
"$torchrun" --version > "$out/dp/torchrun_version.txt" 2>&1 || true
"$(dirname "$torchrun")/python" -c "import torch; print(torch.__version__)" >> "$out/dp/torchrun_version.txt" 2>&1 || true
run one "$sublet" "${common[@]}" --batch-size 12 --checkpoint "$out/dp/one.ckpt" --metrics-json "$out/dp/one.json"
run gloo_cuda_2 "$sublet" "${common[@]}" --batch-size 6 --backend gloo --sync-batch-norm --nproc-per-node 2 \
    --master-port 29531 --checkpoint "$out/dp/gloo_cuda_2.ckpt" --metrics-json "$out/dp/gloo_cuda_2.json"
run torchrun_gloo_cuda_2 "$torchrun" --nproc-per-node 2 --master-port 29532 --no-python "$sublet" "${common[@]}" \
    --batch-size 6 --backend gloo --sync-batch-norm --checkpoint "$out/dp/torchrun_gloo_cuda_2.ckpt" \
    --metrics-json "$out/dp/torchrun_gloo_cuda_2.json"
run torchrun_nccl_1 "$torchrun" --nproc-per-node 1 --master-port 29533 --no-python "$sublet" "${common[@]}" \
    --batch-size 12 --backend nccl --checkpoint "$out/dp/torchrun_nccl_1.ckpt" --metrics-json "$out/dp/torchrun_nccl_1.json"
for t in test_data_parallel_gpu test_trainer_data_parallel_gpu; do
  [ -x "$pack/tests/$t" ] && run "$t" "$pack/tests/$t"
done
grep -H '"num_sync_all_streams"' "$out"/dp/*.json > "$out/dp/num_sync_all_streams.txt" 2>&1 || true
tar czf "$final/data_parallel.tar.gz" -C "$out" dp && echo "packed $final/data_parallel.tar.gz"
cat "$out"/dp/*.log | grep -E "^==|exit status|error|final test accuracy|relative" | head -60
