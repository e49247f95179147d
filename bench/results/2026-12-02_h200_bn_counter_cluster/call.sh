#!/usr/bin/env bash
# Session 13 call 1 (prepared in session 12): branch bn-cluster (c7b0f86 = bn-counter 42637e8 +
# cluster batch norm) packed from /work/bnc/build, plus main's sublet at a60f843 as .gpu/sublet_main.
# Every gpu test binary (incl. the new test_cuda_batch_norm_count), the channels-last batch-norm
# tests on three launches and without clusters; R18 graph step: bn-cluster default, without the
# cluster kernels, main, PyTorch; kernel times of the default.
set -u
start=$SECONDS
tar -xJf .gpux/s13pack.tar.xz
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT/t; mkdir -p $R
for t in .gpu/tests/*; do
  SUBLET_REQUIRE_GPU=1 timeout 150 $t > $R/$(basename $t).log 2>&1
  echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$(basename $t).log | tr '\n' ' ')"
done > $OUT/tests_summary.txt
SUBLET_BN_NO_SMALL_KERNEL=1 SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/tests/test_cuda_channels_last_batch_norm > $R/three_launch.log 2>&1
echo "three_launch rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/three_launch.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
SUBLET_BN_NO_CLUSTER_KERNEL=1 SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/tests/test_cuda_channels_last_batch_norm > $R/no_cluster.log 2>&1
echo "no_cluster rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/no_cluster.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
echo "passed binaries: $(grep -c 'rc=0 \[  PASSED' $OUT/tests_summary.txt)"; grep -v "rc=0 \[  PASSED" $OUT/tests_summary.txt
grep -h -B2 -A8 "Failure" $R/*.log | head -40
echo "tests done after $((SECONDS-start)) s"
ms() { python3 -c "import json;d=json.load(open('$1'));print(round(d['ms_per_step'],3),'ms', d['peak_allocated_bytes']>>20,'MiB')" 2>/dev/null || echo "n/a"; }
R18="--device cuda --model resnet18 --input 3x32x32 --batch-size 128 --classes 10 --channels-last --cuda-graph --steps 200"
S=$OUT/s; mkdir -p $S
for round in 1 2 3; do
  timeout 60 .gpu/sublet bench step $R18 --json $S/r18_cluster_counter_$round.json > $S/r18_a_$round.log 2>&1
  SUBLET_BN_NO_CLUSTER_KERNEL=1 timeout 60 .gpu/sublet bench step $R18 --json $S/r18_counter_$round.json > /dev/null 2>&1
  timeout 60 .gpu/sublet_main bench step $R18 --json $S/r18_main_$round.json > /dev/null 2>&1
  python3 bench/pytorch_step.py $R18 --json $S/r18_pytorch_$round.json > /dev/null 2>&1
  echo "r18 round $round: cluster+counter $(ms $S/r18_cluster_counter_$round.json) | counter only $(ms $S/r18_counter_$round.json) | main $(ms $S/r18_main_$round.json) | pytorch $(ms $S/r18_pytorch_$round.json)"
done
tail -2 $S/r18_a_1.log
K=$OUT/k; mkdir -p $K
SUBLET=.gpu/sublet PYTHON=python3 NCU_CACHE_CONTROL=none SIDES=sublet timeout 150 bash bench/kernel_times.sh $K r18_b128_fp32_cl_s13 --model resnet18 --input 3x32x32 --batch-size 128 --classes 10 --channels-last 2>&1 | head -40
echo "all done after $((SECONDS-start)) s"
tar czf $OUT/call1.tar.gz -C $OUT t s k
