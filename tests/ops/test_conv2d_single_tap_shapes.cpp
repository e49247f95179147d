// Which convolutions ops/cuda/conv2d_single_tap.h serves as GEMMs: one output pixel, exactly one
// kernel tap inside the input, groups 1, float32/bfloat16/float16, channels-last (or a 1x1
// kernel on a 1x1 plane in NCHW, where the weight is a plain [K, C] matrix). Host logic only:
// checked on the CPU; the GEMMs themselves are in test_cuda_conv2d_channels_last.
#include <gtest/gtest.h>

#include "ops/cuda/conv2d_single_tap.h"

namespace sublet::ops {
namespace {

Conv2dShape shape(std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t stride, std::int64_t pad,
                  MemoryFormat format = MemoryFormat::ChannelsLast, std::int64_t dilation = 1, std::int64_t groups = 1) {
  Conv2dShape s;
  s.batch = 4, s.in_channels = 16, s.in_height = h, s.in_width = w, s.out_channels = 16;
  s.kernel_h = s.kernel_w = k, s.stride_h = s.stride_w = stride, s.pad_h = s.pad_w = pad;
  s.dilation_h = s.dilation_w = dilation, s.groups = groups, s.format = format;
  return s;
}

TEST(Conv2dSingleTap, OneTapInsideTheInputOfAOnePixelOutput) {
  EXPECT_TRUE(cuda::conv2d_single_tap_applies(shape(1, 1, 3, 1, 1), DType::Float32));   // ResNet-18 layer 4
  EXPECT_TRUE(cuda::conv2d_single_tap_applies(shape(1, 1, 3, 2, 1), DType::BFloat16));
  EXPECT_TRUE(cuda::conv2d_single_tap_applies(shape(2, 2, 1, 2, 0), DType::Float16));   // 1x1 stride-2 downsample
  EXPECT_TRUE(cuda::conv2d_single_tap_applies(shape(1, 1, 3, 1, 2, MemoryFormat::ChannelsLast, 2), DType::Float32));
  EXPECT_TRUE(cuda::conv2d_single_tap_applies(shape(1, 1, 1, 1, 0, MemoryFormat::Contiguous), DType::Float32));
}

TEST(Conv2dSingleTap, EverythingElseStaysWithCuDnn) {
  EXPECT_FALSE(cuda::conv2d_single_tap_applies(shape(2, 2, 3, 2, 1), DType::Float32));   // 4 taps inside
  EXPECT_FALSE(cuda::conv2d_single_tap_applies(shape(2, 2, 3, 1, 1), DType::Float32));   // a 2x2 output
  EXPECT_FALSE(cuda::conv2d_single_tap_applies(shape(1, 1, 3, 1, 1), DType::Float64));   // no GEMM type for it
  EXPECT_FALSE(cuda::conv2d_single_tap_applies(shape(1, 1, 3, 1, 1, MemoryFormat::ChannelsLast, 1, 2), DType::Float32));
  EXPECT_FALSE(cuda::conv2d_single_tap_applies(shape(1, 1, 3, 1, 1, MemoryFormat::Contiguous), DType::Float32));
}

}  // namespace
}  // namespace sublet::ops
