// Which convolutions ops/cuda/conv2d_im2col.h serves as im2col + GEMM: channels-last, groups 1,
// float32/bfloat16/float16, fewer than 8 input channels, at least 16 values per column row and
// more than one output pixel. Host logic only: checked on the CPU; the kernels themselves are in
// test_cuda_conv2d_im2col.
#include <gtest/gtest.h>

#include "ops/cuda/conv2d_im2col.h"

namespace sublet::ops {
namespace {

Conv2dShape shape(std::int64_t channels, std::int64_t size, std::int64_t k, std::int64_t stride, std::int64_t pad,
                  MemoryFormat format = MemoryFormat::ChannelsLast, std::int64_t groups = 1) {
  Conv2dShape s;
  s.batch = 4, s.in_channels = channels, s.in_height = s.in_width = size, s.out_channels = 64;
  s.kernel_h = s.kernel_w = k, s.stride_h = s.stride_w = stride, s.pad_h = s.pad_w = pad;
  s.groups = groups, s.format = format;
  return s;
}

TEST(Conv2dIm2col, NarrowChannelsLastInputs) {
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(3, 32, 7, 2, 3), DType::Float32));    // ResNet stem at 32x32
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(3, 224, 7, 2, 3), DType::BFloat16));  // at 224x224
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(7, 16, 3, 1, 1), DType::Float16));     // 63 values per row
  EXPECT_TRUE(cuda::conv2d_im2col_applies(shape(2, 8, 3, 1, 1), DType::Float32));      // 18 values per row
}

TEST(Conv2dIm2col, EverythingElseStaysWithCuDnn) {
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(8, 32, 3, 1, 1), DType::Float32));   // cuDNN's tensor cores take 8
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(1, 28, 3, 1, 1), DType::Float32));   // 9 values per row
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 32, 7, 2, 3, MemoryFormat::Contiguous), DType::Float32));
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(4, 32, 3, 1, 1, MemoryFormat::ChannelsLast, 2), DType::Float32));
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 32, 7, 2, 3), DType::Float64));    // no GEMM type for it
  EXPECT_FALSE(cuda::conv2d_im2col_applies(shape(3, 3, 3, 1, 0), DType::Float32));     // one output pixel
}

}  // namespace
}  // namespace sublet::ops
