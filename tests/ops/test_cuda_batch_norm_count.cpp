// Batch norm's training forward counting the batch (ops::batch_norm_forward_training's and
// ops::batch_norm_relu_forward_training's num_batches_tracked) on CUDA: the count goes up by
// exactly one per call, inside the kernels' own launches where the counting tables have an entry
// (the split and one-launch kernels: channels-last, and 16-bit NCHW), by one more launch
// elsewhere (float32 NCHW: cuDNN and the fused one-block kernels).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/half.h"
#include "cuda_test_support.h"
#include "ops/batch_norm.h"
#include "ops/batch_norm_kernels.h"
#include "ops/batch_norm_relu.h"
#include "ops/batch_norm_relu_kernels.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

// Runs `calls` training forwards (plain, then fused with a residual where that is served) with
// a counter starting at 41 and returns its value.
template <typename T>
std::int64_t count_after(BatchNormShape s, MemoryFormat format, int calls, bool relu) {
  s.format = format;
  const auto n = static_cast<std::size_t>(s.numel()), c = static_cast<std::size_t>(s.channels);
  std::vector<T> values;
  for (std::size_t i = 0; i < n; ++i) values.push_back(T(static_cast<float>(i % 7) * 0.5f));
  DeviceBuffer<T> x(values), residual(std::vector<T>(n, T(0.25f))), y(n);
  DeviceBuffer<float> weight(std::vector<float>(c, 1.0f)), bias(std::vector<float>(c, 0.0f));
  DeviceBuffer<float> running_mean(std::vector<float>(c, 0.0f)), running_var(std::vector<float>(c, 1.0f));
  DeviceBuffer<float> mean(c), invstd(c);
  DeviceBuffer<std::int64_t> counter(std::vector<std::int64_t>{41});
  const Context ctx = gpu_context();
  const DType dtype = DTypeOf<T>::value;
  for (int call = 0; call < calls; ++call) {
    if (relu) {
      batch_norm_relu_forward_training(ctx, s, dtype, x.get(), residual.get(), weight.get(), bias.get(),
                                       running_mean.get(), running_var.get(), 0.1, 1e-5, y.get(), mean.get(),
                                       invstd.get(), counter.get());
    } else {
      batch_norm_forward_training(ctx, s, dtype, x.get(), weight.get(), bias.get(), running_mean.get(),
                                  running_var.get(), 0.1, 1e-5, y.get(), mean.get(), invstd.get(), counter.get());
    }
  }
  return counter.download()[0];
}

template <typename T>
void expect_counts(const BatchNormShape& s, MemoryFormat format) {
  for (bool relu : {false, true}) {
    EXPECT_EQ(count_after<T>(s, format, 1, relu), 42) << (relu ? "batch_norm_relu" : "batch_norm");
    EXPECT_EQ(count_after<T>(s, format, 3, relu), 44) << (relu ? "batch_norm_relu" : "batch_norm");
  }
}

}  // namespace

TEST(CudaBatchNormCount, TheSplitKernelsCountInTheirOwnLaunches) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm counting the batch on CUDA");
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    EXPECT_NE(batch_norm_forward_training_counting_kernels().find(DeviceType::CUDA, dtype, MemoryFormat::ChannelsLast),
              nullptr);
    EXPECT_NE(batch_norm_relu_forward_counting_kernels().find(DeviceType::CUDA, dtype, MemoryFormat::ChannelsLast),
              nullptr);
  }
  // float32 NCHW has cuDNN's and the one-block fused kernels: counted by one more launch.
  EXPECT_EQ(batch_norm_forward_training_counting_kernels().find(DeviceType::CUDA, DType::Float32), nullptr);
  EXPECT_NE(batch_norm_forward_training_counting_kernels().find(DeviceType::CUDA, DType::BFloat16), nullptr);
}

TEST(CudaBatchNormCount, EveryPathCountsOncePerCall) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm counting the batch on CUDA");
  expect_counts<float>({128, 256, 2, 2}, MemoryFormat::ChannelsLast);    // one launch each way
  expect_counts<float>({8, 64, 32, 32}, MemoryFormat::ChannelsLast);     // the three launches
  expect_counts<BFloat16>({8, 64, 32, 32}, MemoryFormat::ChannelsLast);
  expect_counts<BFloat16>({4, 16, 8, 8}, MemoryFormat::Contiguous);      // 16-bit NCHW: split kernels
  expect_counts<float>({4, 16, 8, 8}, MemoryFormat::Contiguous);         // counted apart
}
