#!/usr/bin/env bash
# Session 13 call 4: main 5fd6328 (weight gradients finished beside backward, run_beside; the
# update overlap; the gradient sum). Every gpu test binary; two deliberately broken ones (the
# update lane not waiting for pending side work; run_beside not keeping its tensors); R18 graph
# rounds: default, SUBLET_NO_DEFERRED_JOIN=1, PyTorch; then the amp suite for the README.
set -u
start=$SECONDS
tar -xJf .gpux/s13pack4.tar.xz
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT/t; mkdir -p $R
for t in .gpu/tests/*; do
  SUBLET_REQUIRE_GPU=1 timeout 150 $t > $R/$(basename $t).log 2>&1
  echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$(basename $t).log | tr '\n' ' ')"
done > $OUT/tests_summary.txt
SUBLET_BN_NO_SMALL_KERNEL=1 SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/tests/test_cuda_channels_last_batch_norm > $R/three_launch.log 2>&1
echo "three_launch rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/three_launch.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
for b in broken_update_lane_no_wait broken_beside_no_keep; do
  SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/$b > $R/$b.log 2>&1
  echo "BROKEN $b (should fail) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$b.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
done
echo "passed binaries: $(grep -c 'rc=0 \[  PASSED' $OUT/tests_summary.txt)"; grep -v "rc=0 \[  PASSED" $OUT/tests_summary.txt
grep -h -B2 -A6 "Failure" $R/*.log | head -30
echo "tests done after $((SECONDS-start)) s"
ms() { python3 -c "import json;d=json.load(open('$1'));print(round(d['ms_per_step'],3),'ms', d['peak_allocated_bytes']>>20,'MiB')" 2>/dev/null || echo "n/a"; }
R18="--device cuda --model resnet18 --input 3x32x32 --batch-size 128 --classes 10 --channels-last --cuda-graph --steps 200"
S=$OUT/s; mkdir -p $S
for round in 1 2 3; do
  timeout 60 .gpu/sublet bench step $R18 --json $S/r18_default_$round.json > $S/r18_default_$round.log 2>&1
  SUBLET_NO_DEFERRED_JOIN=1 timeout 60 .gpu/sublet bench step $R18 --json $S/r18_joined_$round.json > /dev/null 2>&1
  python3 bench/pytorch_step.py $R18 --json $S/r18_pytorch_$round.json > /dev/null 2>&1
  echo "r18 round $round: default $(ms $S/r18_default_$round.json) | joined at once $(ms $S/r18_joined_$round.json) | pytorch $(ms $S/r18_pytorch_$round.json)"
done
echo "rounds done after $((SECONDS-start)) s"
A=$OUT/amp; mkdir -p $A
SUITE=amp SUBLET=.gpu/sublet PYTHON=python3 timeout 300 bash bench/gpu_step_suite.sh $A > $A/suite.log 2>&1
echo "suite rc=$? after $((SECONDS-start)) s"; tail -22 $A/amp_table.txt 2>/dev/null
tar czf $OUT/call4.tar.gz -C $OUT t s amp
