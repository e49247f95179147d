// Channels-last (NHWC) batch norm and fused batch norm + residual + ReLU on CUDA for float32,
// bfloat16 and float16 activations with float32 parameters (ops/cuda/batch_norm_split.cu,
// registered under MemoryFormat::ChannelsLast): each case against the float32 CPU kernel (the
// input permuted to NHWC on the host, the results permuted back), and against the same case run
// NCHW on the GPU (cuDNN or the fused one-block kernels for float32, the split kernels for
// 16 bits). Shapes with channel counts below, at and across the 32-channel tiles, [N, C],
// batch 1 with a large image, 2048 channels of 7x7. Tolerances: tests/ops/batch_norm_layout_check.h;
// the NHWC-against-NCHW comparisons take the same ones. NaN fails everywhere.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "batch_norm_layout_check.h"
#include "core/errors.h"
#include "core/half.h"
#include "ops/cuda/batch_norm_split_cuda.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

const std::vector<BatchNormShape> kShapes = {{2, 3, 5, 7},   {16, 37, 1, 1},  {1, 4, 96, 130},
                                             {8, 2048, 7, 7}, {2, 64, 56, 56}, {3, 33, 9, 11}};

// The case channels-last against the CPU, and against the case NCHW on the GPU.
template <typename H>
void check_layouts(BatchNormCase k) {
  k.shape.format = MemoryFormat::ChannelsLast;
  const BatchNormGpuResults last = check_batch_norm<H>(k);
  // float32 NCHW fuses the ReLU only up to kFusedBatchNormMaxPerChannel values per channel.
  const std::int64_t count = k.shape.batch * k.shape.spatial();
  if (!kIsSixteenBit<H> && k.relu && count > kFusedBatchNormMaxPerChannel) return;
  k.shape.format = MemoryFormat::Contiguous;
  const BatchNormGpuResults nchw = check_batch_norm<H>(k);
  const std::string what = storage_name<H>() + " " + k.name() + ": channels-last against NCHW ";
  expect_activation_close(to_storage<H>(last.output), nchw.output, what + "output");
  expect_activation_close(to_storage<H>(last.grad_input), nchw.grad_input, what + "grad_input");
  if (k.training) {
    expect_close(last.save_mean, nchw.save_mean, kStatRtol, kStatAtol, what + "save_mean");
    expect_close(last.save_invstd, nchw.save_invstd, kStatRtol, kStatAtol, what + "save_invstd");
  }
  const double sum_atol = kParamGradAtolPerValue * static_cast<double>(count);
  expect_close(last.grad_weight, nchw.grad_weight, kParamGradRtol, sum_atol, what + "grad_weight");
  expect_close(last.grad_bias, nchw.grad_bias, kParamGradRtol, sum_atol, what + "grad_bias");
  if (k.relu) expect_close(last.grad_residual, nchw.grad_residual, 0, 0, what + "grad_residual");
}

template <typename H>
void check_all_cases() {
  for (const BatchNormShape& s : kShapes) {
    BatchNormCase k;
    k.shape = s;
    check_layouts<H>(k);  // training
    k.training = false;
    check_layouts<H>(k);  // eval
    k.training = true;
    k.relu = k.residual = true;
    check_layouts<H>(k);  // fused, with a residual
  }
  BatchNormCase plain;
  plain.shape = {3, 40, 6, 7};
  plain.affine = plain.running = false;
  check_layouts<H>(plain);
  plain.relu = true;
  check_layouts<H>(plain);  // fused, no residual
}

}  // namespace

TEST(CudaChannelsLastBatchNorm, Float32MatchesTheCpuAndNchw) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last float32 batch norm against the CPU and NCHW");
  check_all_cases<float>();
}

TEST(CudaChannelsLastBatchNorm, BFloat16MatchesTheFloat32CpuAndNchw) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last bfloat16 batch norm against the float32 CPU and NCHW");
  check_all_cases<BFloat16>();
}

TEST(CudaChannelsLastBatchNorm, Float16MatchesTheFloat32CpuAndNchw) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last float16 batch norm against the float32 CPU and NCHW");
  check_all_cases<Float16>();
}

// Many reduction slices per channel (ops/cuda/batch_norm_reduce_packed.cuh): ResNet-18's first
// stage at batch 128 (1,024 slices of 128 rows), [32, 64, 25, 25] (157, the last one short of
// rows), [8, 256, 4, 4] (two columns of channels, two slices).
TEST(CudaChannelsLastBatchNorm, ManySlicesMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last batch norm with many reduction slices against the CPU");
  for (const BatchNormShape& shape : std::vector<BatchNormShape>{{128, 64, 32, 32}, {32, 64, 25, 25}, {8, 256, 4, 4}}) {
    BatchNormCase k;
    k.shape = shape;
    k.shape.format = MemoryFormat::ChannelsLast;
    check_batch_norm<float>(k);
    k.relu = k.residual = true;
    check_batch_norm<float>(k);
    check_batch_norm<BFloat16>(k);
  }
}

// A mean of 1000 against values spread over 5: the per-thread Welford accumulators and the
// combine's deviations about the combined mean keep the variance from losing digits to the mean.
TEST(CudaChannelsLastBatchNorm, StatisticsFarFromZeroMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last batch norm statistics of offset inputs against the CPU");
  BatchNormCase k;
  k.shape = {32, 64, 25, 25};
  k.shape.format = MemoryFormat::ChannelsLast;
  k.input_offset = 1000.0f;
  check_batch_norm<float>(k);
  k.training = false;
  check_batch_norm<float>(k);
}

TEST(CudaChannelsLastBatchNorm, RepeatedRunsGiveIdenticalBits) {
  SUBLET_SKIP_WITHOUT_GPU("determinism of the channels-last reductions and their combine");
  BatchNormCase k;
  k.shape = {32, 64, 25, 25};
  k.shape.format = MemoryFormat::ChannelsLast;
  k.relu = k.residual = true;
  const BatchNormGpuResults a = check_batch_norm<float>(k), b = check_batch_norm<float>(k);
  expect_float_bits_equal(b.output, a.output, "output");
  expect_float_bits_equal(b.save_mean, a.save_mean, "save_mean");
  expect_float_bits_equal(b.save_invstd, a.save_invstd, "save_invstd");
  expect_float_bits_equal(b.grad_input, a.grad_input, "grad_input");
  expect_float_bits_equal(b.grad_weight, a.grad_weight, "grad_weight");
  expect_float_bits_equal(b.grad_bias, a.grad_bias, "grad_bias");
}

// Tensors of up to 2,048 rows train in one launch each way
// (ops/cuda/batch_norm_small_channels_last.cuh): ResNet-18's last three stages at batch 128
// ([128, 128, 4, 4] is exactly 2,048 rows), a short block of rows ([5, 16, 3, 3]), and one row
// more than the limit ([129, 8, 4, 4]: the split kernels), each plain and with residual + ReLU,
// with inputs offset by 1000, and run twice for identical bits.
TEST(CudaChannelsLastBatchNorm, SmallTensorsInOneLaunchMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("channels-last batch norm of small tensors (one launch each way) against the CPU");
  const std::vector<BatchNormShape> shapes{{128, 128, 4, 4}, {128, 256, 2, 2}, {128, 512, 1, 1}, {5, 16, 3, 3},
                                           {129, 8, 4, 4}};
  for (BatchNormShape shape : shapes) {
    shape.format = MemoryFormat::ChannelsLast;
    const bool small = shape.batch * shape.spatial() <= 2048;
    for (DType dtype : {DType::Float32, DType::BFloat16}) {
      EXPECT_EQ(cuda::split_batch_norm_takes_one_launch(shape, dtype), small)
          << dtype_name(dtype) << " [" << shape.batch << "," << shape.channels << "," << shape.height << "]";
    }
    BatchNormCase k;
    k.shape = shape;
    check_batch_norm<float>(k);
    check_batch_norm<BFloat16>(k);
    k.relu = k.residual = true;
    check_batch_norm<Float16>(k);
    const BatchNormGpuResults a = check_batch_norm<float>(k), b = check_batch_norm<float>(k);
    expect_float_bits_equal(b.output, a.output, "output");
    expect_float_bits_equal(b.grad_input, a.grad_input, "grad_input");
    expect_float_bits_equal(b.grad_weight, a.grad_weight, "grad_weight");
    k.input_offset = 1000.0f;
    check_batch_norm<float>(k);
  }
}

TEST(CudaChannelsLastBatchNorm, Float64ChannelsLastHasNoKernel) {
  SUBLET_SKIP_WITHOUT_GPU("the kernel table's answer for float64 channels-last");
  BatchNormShape s{2, 3, 4, 5};
  s.format = MemoryFormat::ChannelsLast;
  DeviceBuffer<double> x(s.numel()), y(s.numel()), mean(3), invstd(3);
  EXPECT_THROW(batch_norm_forward_training(gpu_context(), s, DType::Float64, x.get(), nullptr, nullptr, nullptr,
                                           nullptr, 0.1, 1e-5, y.get(), mean.get(), invstd.get()),
               DTypeError);
  EXPECT_FALSE(batch_norm_relu_fused(gpu_context(), s, DType::Float64));
}
