// Which convolutions ops/cuda/conv2d_channel_pad.h pads, and to how many channels: bfloat16 or
// float16, channels-last, groups 1, fewer than 8 input channels that are not already a multiple
// of the setting, not a single-tap GEMM; in_channels rounded up to a multiple of 4 or 8. Checked
// on the CPU; the padded convolutions themselves are in test_cuda_conv2d_channel_pad.
#include <gtest/gtest.h>

#include "core/tuning.h"
#include "ops/cuda/conv2d_channel_pad.h"

namespace sublet::ops {
namespace {

Conv2dShape shape(std::int64_t channels, std::int64_t size = 224, std::int64_t k = 7, std::int64_t stride = 2,
                  std::int64_t pad = 3, MemoryFormat format = MemoryFormat::ChannelsLast, std::int64_t groups = 1) {
  Conv2dShape s;
  s.batch = 8, s.in_channels = channels, s.in_height = s.in_width = size, s.out_channels = 64;
  s.kernel_h = s.kernel_w = k, s.stride_h = s.stride_w = stride, s.pad_h = s.pad_w = pad;
  s.groups = groups, s.format = format;
  return s;
}

TEST(Conv2dChannelPad, TheStemIsPaddedToTheSetting) {
  for (DType dtype : {DType::BFloat16, DType::Float16}) {
    EXPECT_EQ(cuda::conv2d_padded_channels(shape(3), dtype, 4), 4) << dtype_name(dtype);
    EXPECT_EQ(cuda::conv2d_padded_channels(shape(3), dtype, 8), 8) << dtype_name(dtype);
    EXPECT_EQ(cuda::conv2d_padded_channels(shape(3), dtype, kConvPadChannelsOff), 0) << dtype_name(dtype);
  }
}

TEST(Conv2dChannelPad, ChannelsRoundUpToAMultiple) {
  const std::int64_t expected4[] = {0, 4, 4, 4, 0, 8, 8, 8};  // by in_channels 0..7; 4 is already one
  for (std::int64_t c = 1; c < 8; ++c) {
    EXPECT_EQ(cuda::conv2d_padded_channels(shape(c), DType::BFloat16, 4), expected4[c]) << "C=" << c;
    EXPECT_EQ(cuda::conv2d_padded_channels(shape(c), DType::Float16, 8), 8) << "C=" << c;
  }
  // Other kernels, strides, padding and dilation are padded alike.
  Conv2dShape dilated = shape(2, 17, 3, 1, 2);
  dilated.dilation_h = 2, dilated.stride_w = 3;
  EXPECT_EQ(cuda::conv2d_padded_channels(dilated, DType::BFloat16, 4), 4);
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(1, 28, 1, 1, 0), DType::BFloat16, 8), 8);  // 1x1
}

TEST(Conv2dChannelPad, EverythingElseRunsAsItIs) {
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(3), DType::Float32, 4), 0);  // float32: im2col's
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(3), DType::Float64, 8), 0);
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(3, 224, 7, 2, 3, MemoryFormat::Contiguous), DType::BFloat16, 4), 0);
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(6, 32, 3, 1, 1, MemoryFormat::ChannelsLast, 2), DType::BFloat16, 4), 0);
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(8), DType::BFloat16, 8), 0);   // cuDNN's NHWC kernels take 8
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(16), DType::Float16, 4), 0);
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(4), DType::BFloat16, 4), 0);   // already a multiple
  // A single-tap convolution (3x3 padding 1 on a 1x1 plane) is a cuBLAS GEMM already.
  EXPECT_EQ(cuda::conv2d_padded_channels(shape(3, 1, 3, 1, 1), DType::BFloat16, 8), 0);
}

TEST(Conv2dChannelPad, ThePaddedShapeChangesOnlyItsChannels) {
  const Conv2dShape s = shape(3);
  const Conv2dShape p = cuda::conv2d_with_in_channels(s, 8);
  EXPECT_EQ(p.in_channels, 8);
  EXPECT_EQ(p.out_height(), s.out_height());
  EXPECT_EQ(p.out_width(), s.out_width());
  EXPECT_EQ(p.output_numel(), s.output_numel());
  EXPECT_EQ(p.weight_numel(), s.weight_numel() / 3 * 8);
  EXPECT_EQ(p.format, s.format);
}

}  // namespace
}  // namespace sublet::ops
