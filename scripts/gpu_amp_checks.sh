#!/usr/bin/env bash
# The mixed-precision GPU checks (from the repository root on the GPU machine, with
# .gpux/pack.tar.xz made from every gpu-labelled test binary, sublet and the NVTX library, and
# data/mnist): every GPU test with SUBLET_REQUIRE_GPU=1, then ResNet-20 on the 8,000/2,000 MNIST
# digits with the default recipe in bf16 + channels-last and in fp16 (the accuracy goal: >= 99.0%).
# Results under $OUT.
set -u
tar -xJf .gpux/pack.tar.xz
bash scripts/gpu_run_packed_tests.sh
A=$OUT/accuracy; mkdir -p $A
for run in "bf16 --channels-last" "fp16"; do
  set -- $run
  name=$1${2:+_cl}
  timeout 240 .gpu/sublet train --device cuda --model resnet20 --data mnist --precision $run \
    --metrics-json $A/$name.json > $A/$name.log 2>&1
  echo "train $name rc=$? $(grep 'final test accuracy' $A/$name.log)"
done
tar czf $OUT/accuracy.tar.gz -C $OUT accuracy
