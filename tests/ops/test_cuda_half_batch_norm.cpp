// Batch norm and the fused batch norm + residual + ReLU on CUDA with a bfloat16/float16 NCHW
// input and float32 parameters and statistics (ops/cuda/batch_norm_split.cu), against the
// float32 CPU kernel on the same 16-bit-rounded inputs: output, save_mean/save_invstd, running
// statistics, and every gradient, in training and eval, at small odd shapes, [N, C] inputs,
// batch 1 with a large image, 2048 channels of 7x7, and channels beyond the float32 fused
// kernels' per-channel limit. Tolerances: tests/ops/batch_norm_layout_check.h and
// layout_test_support.h (bfloat16 activations one ulp + 1e-3 of the output's scale, float16 one
// ulp + 2e-4; float32 statistics rtol 1e-4, atol 1e-4; parameter gradients rtol 1e-4, atol 1e-5
// per summed value). NaN fails everywhere.
#include <gtest/gtest.h>

#include <vector>

#include "batch_norm_layout_check.h"
#include "core/half.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

// [N, C, H, W]: odd sizes; [N, C]; batch 1 with a large image; many channels; a larger channel
// (3136 values: beyond the float32 fused kernels' 2048) split over several blocks.
const std::vector<BatchNormShape> kShapes = {
    {2, 3, 5, 7}, {16, 37, 1, 1}, {1, 4, 96, 130}, {8, 2048, 7, 7}, {4, 64, 28, 28}};

template <typename H>
void for_each_shape(BatchNormCase base) {
  for (const BatchNormShape& s : kShapes) {
    base.shape = s;
    check_batch_norm<H>(base);
  }
}

}  // namespace

TEST(CudaHalfBatchNorm, TrainingMatchesTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit batch norm training against the float32 CPU kernel");
  for_each_shape<BFloat16>({});
  for_each_shape<Float16>({});
}

TEST(CudaHalfBatchNorm, TrainingWithoutAffineOrRunningStatisticsMatchesTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit batch norm without weight/bias or running buffers");
  BatchNormCase plain;
  plain.affine = false;
  plain.running = false;
  plain.shape = {3, 5, 6, 7};
  check_batch_norm<BFloat16>(plain);
  check_batch_norm<Float16>(plain);
}

TEST(CudaHalfBatchNorm, EvalForwardAndBackwardMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit batch norm inference and its backward");
  BatchNormCase eval;
  eval.training = false;
  for_each_shape<BFloat16>(eval);
  for_each_shape<Float16>(eval);
  eval.affine = false;
  eval.shape = {3, 5, 6, 7};
  check_batch_norm<Float16>(eval);
}

TEST(CudaHalfBatchNorm, FusedReluWithAndWithoutResidualMatchesTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit fused batch norm + residual + ReLU");
  BatchNormCase fused;
  fused.relu = true;
  for (const bool residual : {true, false}) {
    fused.residual = residual;
    for_each_shape<BFloat16>(fused);
    for_each_shape<Float16>(fused);
  }
}

TEST(CudaHalfBatchNorm, FusedKernelsTakeAnyChannelSize) {
  SUBLET_SKIP_WITHOUT_GPU("batch_norm_relu_fused for 16-bit inputs");
  const BatchNormShape large{64, 8, 56, 56};  // 200704 values per channel
  EXPECT_TRUE(batch_norm_relu_fused(gpu_context(), large, DType::BFloat16));
  EXPECT_TRUE(batch_norm_relu_fused(gpu_context(), large, DType::Float16));
  EXPECT_FALSE(batch_norm_relu_fused(gpu_context(), large, DType::Float32)) << "float32 NCHW keeps its 2048 limit";
}

TEST(CudaHalfBatchNorm, RepeatedRunsGiveIdenticalBits) {
  SUBLET_SKIP_WITHOUT_GPU("determinism of the split reductions");
  BatchNormCase k;
  k.shape = {4, 64, 28, 28};
  const BatchNormGpuResults a = check_batch_norm<BFloat16>(k), b = check_batch_norm<BFloat16>(k);
  expect_float_bits_equal(b.output, a.output, "output");
  expect_float_bits_equal(b.save_invstd, a.save_invstd, "save_invstd");
  expect_float_bits_equal(b.grad_input, a.grad_input, "grad_input");
  expect_float_bits_equal(b.grad_weight, a.grad_weight, "grad_weight");
}
