#!/usr/bin/env bash
# The GPU job session 7 could not run (no device was lent after its seventh call): the 16-bit CUDA
# kernels' tests (issue 15's first piece), --nvtx under Nsight Systems, and the bf16 step of
# sublet's allocator inside PyTorch under both segment kinds (issue 18, the 1.07x gap). From the
# repository root, after
#   scripts/pack_gpu_run.sh build .gpu test_cuda_half_copy test_cuda_half_elementwise \
#     test_cuda_half_reduce test_half_tensor_cuda test_cuda_copy test_cuda_elementwise test_cuda_reduce
#   scripts/build_torch_allocator.sh
# carrying .gpu and build-torch-allocator/libsublet_torch_allocator.so: bash scripts/gpu_pending_checks.sh
set -x
R=$OUT/half; mkdir -p $R
export SUBLET_REQUIRE_GPU=1
for t in .gpu/tests/*; do timeout 200 $t > $R/$(basename $t).log 2>&1; echo "$(basename $t) rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $R/$(basename $t).log | tr '\n' ' ')"; done
grep -h -B2 -A8 "FAILED\|Failure" $R/test_*.log | head -60
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NSYS"
if [ -n "$NSYS" ]; then
  timeout 150 $NSYS profile -t cuda,nvtx -o $R/nvtx_resnet20 --force-overwrite true .gpu/sublet bench step --device cuda --model resnet20 --steps 3 --warmup 1 --nvtx > $R/nsys_profile.log 2>&1; echo "nsys rc=$?"
  timeout 100 $NSYS stats --report nvtx_sum $R/nvtx_resnet20.nsys-rep > $R/nvtx_sum.txt 2>&1; echo "stats rc=$?"; head -30 $R/nvtx_sum.txt
  rm -f $R/nvtx_resnet20.nsys-rep $R/nvtx_resnet20.sqlite
fi
export PATH=/opt/torch/.venv/bin:$PATH
PYTHON=/opt/torch/.venv/bin/python3 scripts/build_torch_allocator.sh --torch-hooks /tmp/hooks.so > $R/hooks.log 2>&1; echo "hooks rc=$?"
timeout 200 python3 bench/torch_allocator_compare.py --library build-torch-allocator/libsublet_torch_allocator.so --torch-hooks /tmp/hooks.so --precisions bf16 --no-loss-check --rounds 2 --conf expandable_segments:False --json $R/bf16_fixed.json > $R/bf16_fixed.log 2>&1; echo "fixed rc=$?"; grep -E "^\| bf16|step time" $R/bf16_fixed.log
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 200 python3 bench/torch_allocator_compare.py --library build-torch-allocator/libsublet_torch_allocator.so --torch-hooks /tmp/hooks.so --precisions bf16 --no-loss-check --rounds 2 --json $R/bf16_both_expandable.json > $R/bf16_both_expandable.log 2>&1; echo "both expandable rc=$?"; grep -E "^\| bf16|step time" $R/bf16_both_expandable.log
tar czf $OUT/half.tar.gz -C $OUT half
