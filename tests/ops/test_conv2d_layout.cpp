// The host-side rules of the CUDA convolution's descriptors (ops/cuda/conv2d_layout.h), checked on
// the CPU: the strides cuDNN is given for each memory format (NCHW; NHWC activations and the
// [OC, KH, KW, C/g] weight of ops/conv2d.h's channels-last contract), the cuDNN data and compute
// types per dtype (16-bit accumulates in float32), the dtype check, and the call description
// every conv2d CUDA error starts with. Also that the GPU tests' host permute
// (tests/ops/low_precision_gpu_support.h) puts each element where those strides say.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "low_precision_gpu_support.h"
#include "ops/cuda/conv2d_layout.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::cuda;
using namespace sublet::ops::testing;

TEST(Conv2dLayout, StridesPerMemoryFormat) {
  using Strides = std::array<std::int64_t, 4>;
  // (N, C, H, W) = (2, 3, 5, 7)
  EXPECT_EQ(conv_strides({2, 3, 5, 7}, MemoryFormat::Contiguous), (Strides{105, 35, 7, 1}));
  EXPECT_EQ(conv_strides({2, 3, 5, 7}, MemoryFormat::ChannelsLast), (Strides{105, 1, 21, 3}));
  // a channels-last weight (K, C/g, R, S) = (8, 4, 3, 2) is KRSC-dense
  EXPECT_EQ(conv_strides({8, 4, 3, 2}, MemoryFormat::ChannelsLast), (Strides{24, 1, 8, 4}));
  EXPECT_EQ(conv_tensor_format(MemoryFormat::ChannelsLast), CUDNN_TENSOR_NHWC);
  EXPECT_EQ(conv_tensor_format(MemoryFormat::Contiguous), CUDNN_TENSOR_NCHW);
}

TEST(Conv2dLayout, HostPermuteMatchesTheChannelsLastStrides) {
  const std::int64_t n = 2, c = 3, h = 5, w = 7;
  std::vector<float> nchw(n * c * h * w);
  for (std::size_t i = 0; i < nchw.size(); ++i) nchw[i] = static_cast<float>(i);
  const std::vector<float> nhwc = to_channels_last(nchw, n, c, h, w);
  const auto strides = conv_strides({n, c, h, w}, MemoryFormat::ChannelsLast);
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ic = 0; ic < c; ++ic)
      for (std::int64_t ih = 0; ih < h; ++ih)
        for (std::int64_t iw = 0; iw < w; ++iw) {
          const std::int64_t at = in * strides[0] + ic * strides[1] + ih * strides[2] + iw * strides[3];
          ASSERT_EQ(nhwc[static_cast<std::size_t>(at)], nchw[static_cast<std::size_t>(((in * c + ic) * h + ih) * w + iw)])
              << "n " << in << " c " << ic << " h " << ih << " w " << iw;
        }
  EXPECT_EQ(from_channels_last(nhwc, n, c, h, w), nchw);
}

TEST(Conv2dLayout, SixteenBitTypesAccumulateInFloat32) {
  EXPECT_EQ(conv_data_type(DType::BFloat16), CUDNN_DATA_BFLOAT16);
  EXPECT_EQ(conv_data_type(DType::Float16), CUDNN_DATA_HALF);
  EXPECT_EQ(conv_data_type(DType::Float32), CUDNN_DATA_FLOAT);
  EXPECT_EQ(conv_data_type(DType::Float64), CUDNN_DATA_DOUBLE);
  EXPECT_EQ(conv_compute_type(DType::BFloat16), CUDNN_DATA_FLOAT);
  EXPECT_EQ(conv_compute_type(DType::Float16), CUDNN_DATA_FLOAT);
  EXPECT_EQ(conv_compute_type(DType::Float32), CUDNN_DATA_FLOAT);
  EXPECT_EQ(conv_compute_type(DType::Float64), CUDNN_DATA_DOUBLE);
  EXPECT_THROW(conv_check_dtype(DType::Int64, MemoryFormat::ChannelsLast), DTypeError);
  EXPECT_NO_THROW(conv_check_dtype(DType::BFloat16, MemoryFormat::ChannelsLast));
}

TEST(Conv2dLayout, CallDescriptionNamesPassDtypeLayoutAndShape) {
  Conv2dShape s = conv_shape(2, 4, 9, 8, 6, 3, 2, 2, 1, 1, 2);
  s.format = MemoryFormat::ChannelsLast;
  EXPECT_EQ(conv_call_text("forward", s, DType::BFloat16),
            "conv2d forward (bfloat16, channels_last, input [2, 4, 9, 8], weight [6, 2, 3, 2], stride 2x2, "
            "padding 1x1, dilation 1x1, groups 2)");
}
