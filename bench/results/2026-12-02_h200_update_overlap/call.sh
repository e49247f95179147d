#!/usr/bin/env bash
# Session 13 call 2: main accd370 (Optimizer::backward_and_step, the update overlapping the
# captured backward). Every gpu test binary; the new test against an engine that reports a leaf
# after each contribution (must fail); R18 graph step with 4 (default), 8 and 16 update groups,
# without the overlap, and PyTorch; R50 bf16 bs64 graph with and without the overlap.
set -u
start=$SECONDS
tar -xJf .gpux/s13pack2.tar.xz
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT/t; mkdir -p $R
for t in .gpu/tests/*; do
  SUBLET_REQUIRE_GPU=1 timeout 150 $t > $R/$(basename $t).log 2>&1
  echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$(basename $t).log | tr '\n' ' ')"
done > $OUT/tests_summary.txt
SUBLET_BN_NO_SMALL_KERNEL=1 SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/tests/test_cuda_channels_last_batch_norm > $R/three_launch.log 2>&1
echo "three_launch rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/three_launch.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
SUBLET_NO_UPDATE_OVERLAP=1 SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/tests/test_update_overlap_cuda > $R/no_update_overlap.log 2>&1
echo "no_update_overlap rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/no_update_overlap.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
SUBLET_REQUIRE_GPU=1 timeout 150 .gpu/broken_test_update_overlap_per_contribution > $R/broken_per_contribution.log 2>&1
echo "BROKEN per_contribution (should fail) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/broken_per_contribution.log | tr '\n' ' ')" >> $OUT/tests_summary.txt
echo "passed binaries: $(grep -c 'rc=0 \[  PASSED' $OUT/tests_summary.txt)"; grep -v "rc=0 \[  PASSED" $OUT/tests_summary.txt
grep -h -B2 -A8 "Failure" $R/*.log | head -60
echo "tests done after $((SECONDS-start)) s"
ms() { python3 -c "import json;d=json.load(open('$1'));print(round(d['ms_per_step'],3),'ms', d['peak_allocated_bytes']>>20,'MiB')" 2>/dev/null || echo "n/a"; }
R18="--device cuda --model resnet18 --input 3x32x32 --batch-size 128 --classes 10 --channels-last --cuda-graph --steps 200"
S=$OUT/s; mkdir -p $S
for round in 1 2 3; do
  timeout 60 .gpu/sublet bench step $R18 --json $S/r18_g4_$round.json > $S/r18_g4_$round.log 2>&1
  timeout 60 .gpu/sublet_g8 bench step $R18 --json $S/r18_g8_$round.json > /dev/null 2>&1
  timeout 60 .gpu/sublet_g16 bench step $R18 --json $S/r18_g16_$round.json > /dev/null 2>&1
  SUBLET_NO_UPDATE_OVERLAP=1 timeout 60 .gpu/sublet bench step $R18 --json $S/r18_nooverlap_$round.json > /dev/null 2>&1
  python3 bench/pytorch_step.py $R18 --json $S/r18_pytorch_$round.json > /dev/null 2>&1
  echo "r18 round $round: g4 $(ms $S/r18_g4_$round.json) | g8 $(ms $S/r18_g8_$round.json) | g16 $(ms $S/r18_g16_$round.json) | no overlap $(ms $S/r18_nooverlap_$round.json) | pytorch $(ms $S/r18_pytorch_$round.json)"
done
tail -3 $S/r18_g4_1.log
R50="--device cuda --model resnet50 --input 3x224x224 --batch-size 64 --classes 1000 --precision bf16 --channels-last --cuda-graph --steps 30"
for round in 1 2; do
  timeout 120 .gpu/sublet bench step $R50 --json $S/r50_overlap_$round.json > $S/r50_$round.log 2>&1
  SUBLET_NO_UPDATE_OVERLAP=1 timeout 120 .gpu/sublet bench step $R50 --json $S/r50_nooverlap_$round.json > /dev/null 2>&1
  echo "r50 bf16 bs64 round $round: overlap $(ms $S/r50_overlap_$round.json) | no overlap $(ms $S/r50_nooverlap_$round.json)"
done
tail -3 $S/r50_1.log
echo "all done after $((SECONDS-start)) s"
tar czf $OUT/call2.tar.gz -C $OUT t s
