#!/usr/bin/env bash
# Session 13 call 3: main ffffd10 (update overlap in eighths + convolution input gradients summed
# into the shortcut's). Every gpu test binary; the new gradient-sum test against a graph-API pass
# with beta forced to 0 (must fail); R18 graph step: default, without the gradient sum, without
# both, PyTorch; R50 bf16 bs64 with and without the sum; kernel list of the default.
set -u
start=$SECONDS
tar -xJf .gpux/s13pack3.tar.xz
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT/t; mkdir -p $R
for t in .gpu/tests/*; do
  SUBLET_REQUIRE_GPU=1 timeout 150 $t > $R/$(basename $t).log 2>&1
  echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$(basename $t).log | tr '\n' ' ')"
done > $OUT/tests_summary.txt
SUBLET_BN_NO_SMALL_KERNEL=1 SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/tests/test_cuda_channels_last_batch_norm > $R/three_launch.log 2>&1
echo "three_launch rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/three_launch.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/broken_test_conv_gradient_sum_beta0 > $R/broken_beta0.log 2>&1
echo "BROKEN beta0 (should fail) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/broken_beta0.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
echo "passed binaries: $(grep -c 'rc=0 \[  PASSED' $OUT/tests_summary.txt)"; grep -v "rc=0 \[  PASSED" $OUT/tests_summary.txt
grep -h -B2 -A6 "Failure" $R/*.log | head -40
echo "tests done after $((SECONDS-start)) s"
ms() { python3 -c "import json;d=json.load(open('$1'));print(round(d['ms_per_step'],3),'ms', d['peak_allocated_bytes']>>20,'MiB')" 2>/dev/null || echo "n/a"; }
R18="--device cuda --model resnet18 --input 3x32x32 --batch-size 128 --classes 10 --channels-last --cuda-graph --steps 200"
S=$OUT/s; mkdir -p $S
for round in 1 2 3; do
  timeout 60 .gpu/sublet bench step $R18 --json $S/r18_default_$round.json > $S/r18_default_$round.log 2>&1
  SUBLET_NO_CONV_GRADIENT_SUM=1 timeout 60 .gpu/sublet bench step $R18 --json $S/r18_nosum_$round.json > /dev/null 2>&1
  SUBLET_NO_CONV_GRADIENT_SUM=1 SUBLET_NO_UPDATE_OVERLAP=1 timeout 60 .gpu/sublet bench step $R18 --json $S/r18_neither_$round.json > /dev/null 2>&1
  python3 bench/pytorch_step.py $R18 --json $S/r18_pytorch_$round.json > /dev/null 2>&1
  echo "r18 round $round: default $(ms $S/r18_default_$round.json) | no sum $(ms $S/r18_nosum_$round.json) | neither $(ms $S/r18_neither_$round.json) | pytorch $(ms $S/r18_pytorch_$round.json)"
done
R50="--device cuda --model resnet50 --input 3x224x224 --batch-size 64 --classes 1000 --precision bf16 --channels-last --cuda-graph --steps 30"
for round in 1 2; do
  timeout 120 .gpu/sublet bench step $R50 --json $S/r50_default_$round.json > $S/r50_$round.log 2>&1
  SUBLET_NO_CONV_GRADIENT_SUM=1 timeout 120 .gpu/sublet bench step $R50 --json $S/r50_nosum_$round.json > /dev/null 2>&1
  echo "r50 bf16 bs64 round $round: default $(ms $S/r50_default_$round.json) | no sum $(ms $S/r50_nosum_$round.json)"
done
echo "benches done after $((SECONDS-start)) s"
K=$OUT/k; mkdir -p $K
SUBLET=.gpu/sublet PYTHON=python3 NCU_CACHE_CONTROL=none SIDES=sublet timeout 150 bash bench/kernel_times.sh $K r18_b128_fp32_cl_s13c3 --model resnet18 --input 3x32x32 --batch-size 128 --classes 10 --channels-last 2>&1 | head -16
echo "all done after $((SECONDS-start)) s"
tar czf $OUT/call3.tar.gz -C $OUT t s k
