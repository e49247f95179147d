#!/usr/bin/env bash
# The data-parallel checks on two GPUs of one host, run from the repository root with the binary
# packed (scripts/pack_gpu_run.sh build .gpu) and data/mnist present (scripts/fetch_mnist.sh):
#   bash bench/dp_two_gpu.sh          results and logs in $OUT/dp2 (and $OUT/dp2.tar.gz)
# 1. MNIST, default recipe: one GPU at batch 128 against two GPUs at 64 each (the same global
#    batch); test accuracy within 0.3 points; num_sync_all_streams 0 on both ranks.
# 2. ResNet-50 224x224, batch 64 per GPU: sublet bench step --nproc-per-node 2 and PyTorch DDP
#    (torchrun + bench/pytorch_ddp_step.py) in the same job; 2-GPU img/s >= 1.9x 1-GPU and >=
#    PyTorch DDP's; fp32, and bf16 + channels-last.
# 3. Kill rank 1 mid-run: the launcher stops rank 0 within 60 s; the last checkpoint resumes on
#    one GPU.
set -x
R=$OUT/dp2; mkdir -p $R
export PATH=/opt/torch/.venv/bin:$PATH
S=${SUBLET:-.gpu/sublet}
{ git rev-parse HEAD 2>/dev/null; date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $R/meta.txt
cat $R/meta.txt

# 1. MNIST accuracy.
timeout 300 $S train --batch-size 128 --metrics-json $R/mnist_1gpu.json > $R/mnist_1gpu.log 2>&1; echo "mnist 1 GPU rc=$?"
timeout 300 $S train --nproc-per-node 2 --batch-size 64 --metrics-json $R/mnist_2gpu.json > $R/mnist_2gpu.log 2>&1; echo "mnist 2 GPUs rc=$?"
python3 - "$R" <<'PY'
import json, sys
r = sys.argv[1]
one, two = (json.load(open(f"{r}/mnist_{k}.json")) for k in ("1gpu", "2gpu"))
a, b = one["final_test_acc"], two["final_test_acc"]
syncs = [e.get("num_sync_all_streams") for e in two["epochs"]]
print(f"MNIST test accuracy: 1 GPU {100*a:.2f}%, 2 GPUs {100*b:.2f}%, difference {100*abs(a-b):.2f} points "
      f"({'PASS' if abs(a - b) <= 0.003 else 'FAIL'} <= 0.3); num_sync_all_streams per epoch (both ranks) {syncs} "
      f"({'PASS' if all(s == 0 for s in syncs) else 'FAIL'})")
PY

# 2. Scaling, sublet and PyTorch DDP in the same job: fp32, and bf16 + channels-last.
M="--model resnet50 --input 3x224x224 --classes 1000 --batch-size 64 --steps 30 --warmup 5"
for precision in fp32 bf16; do
  P=""; [ $precision = bf16 ] && P="--precision bf16 --channels-last"
  timeout 300 $S bench step --nproc-per-node 2 $M $P --json $R/sublet_dp2_resnet50_$precision.json \
    > $R/sublet_dp2_resnet50_$precision.log 2>&1; echo "sublet $precision rc=$?"
  tail -3 $R/sublet_dp2_resnet50_$precision.log
  timeout 300 torchrun --nproc-per-node 2 bench/pytorch_ddp_step.py $M $P --json $R/torch_ddp2_resnet50_$precision.json \
    > $R/torch_ddp2_resnet50_$precision.log 2>&1; echo "torch $precision rc=$?"
  tail -2 $R/torch_ddp2_resnet50_$precision.log
  python3 - "$R" $precision <<'PY'
import json, sys
r, p = sys.argv[1], sys.argv[2]
s, t = json.load(open(f"{r}/sublet_dp2_resnet50_{p}.json")), json.load(open(f"{r}/torch_ddp2_resnet50_{p}.json"))
speedup = s["total_img_per_s"] / s["single_gpu_img_per_s"]
print(f"{p}: sublet 2 GPUs {s['total_img_per_s']:.0f} img/s = {speedup:.2f}x its 1 GPU ({'PASS' if speedup >= 1.9 else 'FAIL'} >= 1.9); "
      f"PyTorch DDP 2 GPUs {t['total_img_per_s']:.0f} img/s: sublet {s['total_img_per_s'] / t['total_img_per_s']:.2f}x "
      f"({'PASS' if s['total_img_per_s'] >= t['total_img_per_s'] else 'FAIL'} >= 1.0)")
PY
done

# 3. A rank killed mid-run.
timeout 300 $S train --nproc-per-node 2 --batch-size 64 --epochs 4 --checkpoint $R/kill.ckpt > $R/kill.log 2>&1 &
launcher=$!
for _ in $(seq 600); do [ -f $R/kill.ckpt ] && break; sleep 0.1; done
sleep 1
victim=""
for p in $(pgrep -f "sublet train"); do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "RANK=1" && victim=$p
done
echo "killing rank 1 (pid $victim)"
start=$(date +%s.%N)
kill -9 $victim
wait $launcher; echo "launcher rc=$?"
echo "rank 0 stopped $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s after rank 1 was killed (goal <= 60 s)"
tail -4 $R/kill.log
timeout 300 $S train --batch-size 128 --epochs 4 --resume $R/kill.ckpt --metrics-json $R/resumed.json > $R/resume.log 2>&1; echo "resume on one GPU rc=$?"
grep -E "resumed from|final test accuracy" $R/resume.log
rm -f $R/kill.ckpt
tar czf $OUT/dp2.tar.gz -C $OUT dp2
