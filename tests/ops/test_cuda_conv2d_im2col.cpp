// The narrow-input channels-last convolutions of ops/cuda/conv2d_im2col.h (im2col + cuBLAS GEMM
// for the forward and the weight gradient; cuDNN for the input gradient), for float32, bfloat16
// and float16:
//  - through the kernel tables (float32 on im2col; the 16-bit cases there run cuDNN's stem, which
//    the kernel tables keep for them), against the float32 CPU kernels on the same (16-bit-rounded)
//    inputs at the tolerance per dtype of tests/ops/low_precision_gpu_support.h, and against the
//    NCHW GPU kernels (cuDNN) at twice that;
//  - called directly with a column workspace of a few rows, so the rows run in many chunks (the
//    last one short) and the weight gradient sums its chunks: against the CPU again; with chunks
//    large enough that the weight gradient's split-K (ops/cuda/split_k_plan.h: slices of 256
//    rows) runs inside each, with and without rows left over for the tail GEMM;
//  - the weight gradient twice on the same data: bit-identical (its partials are summed in a
//    fixed order).
// NaN and infinity fail.
#include <gtest/gtest.h>

#include <cstring>

#include "low_precision_gpu_support.h"
#include "ops/cuda/conv2d_im2col.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

// dilation 1 x 2, stride 1 x 2 and padding 2 x 1: lanes that step over input columns.
Conv2dShape asymmetric(Conv2dShape s) {
  s.dilation_w = 2, s.stride_w = 2, s.pad_h = 2;
  return s;
}

std::vector<Conv2dShape> im2col_shapes() {
  return {
      conv_shape(4, 3, 32, 32, 16, 7, 7, 2, 3),    // ResNet's stem on 32x32 images (fewer output channels)
      conv_shape(3, 4, 9, 11, 8, 5, 5, 2, 2),      // 4 channels, odd sizes
      conv_shape(2, 3, 10, 10, 6, 3, 3, 1, 2, 2),  // dilation 2: 27 values per row
      conv_shape(2, 7, 6, 6, 5, 3, 3, 1, 0),       // 7 channels, no padding
      conv_shape(2, 1, 12, 12, 4, 5, 5, 1, 2),     // 1 channel: 25 values per row
      conv_shape(2, 2, 9, 9, 6, 3, 3, 1, 1),       // 2 channels: 18 values per row
      conv_shape(2, 5, 8, 8, 7, 3, 3, 2, 1),       // 5 channels, stride 2
      conv_shape(2, 6, 7, 9, 5, 3, 3, 1, 1),       // 6 channels, odd sizes
      // 1800 rows: the weight gradient's split-K as 7 slices of 256 rows and a tail GEMM of 8.
      conv_shape(5, 3, 40, 36, 8, 7, 7, 2, 3),
      asymmetric(conv_shape(2, 3, 11, 13, 6, 5, 3, 1, 1)),
  };
}

template <typename T>
void check_against_cpu_and_nchw(const Conv2dShape& s) {
  const auto input = rounded_values<T>(s.input_numel(), 71);
  const auto weight = rounded_values<T>(s.weight_numel(), 72);
  const auto bias = rounded_values<T>(s.out_channels, 73);
  const auto grad_output = rounded_values<T>(s.output_numel(), 74);
  const ConvData<T> typed{input.typed, weight.typed, bias.typed, grad_output.typed};
  const ConvResults<float> reference = cpu_conv(s, {input.exact, weight.exact, bias.exact, grad_output.exact}, true);
  const std::string what = "conv2d " + describe(s, DTypeOf<T>::value, MemoryFormat::ChannelsLast);
  const ConvResults<T> channels_last = gpu_conv(s, MemoryFormat::ChannelsLast, typed, true);
  expect_conv_near(s, channels_last, reference, what + " vs float32 CPU");
  const ConvResults<T> nchw = gpu_conv(s, MemoryFormat::Contiguous, typed, true);
  expect_conv_near(s, channels_last, as_float(nchw), what + " vs the NCHW GPU kernels", 2.0);
}

// Forward and weight gradient called directly with `column_bytes`, against the CPU.
template <typename T>
void check_chunked(Conv2dShape s, std::size_t column_bytes) {
  const auto input = rounded_values<T>(s.input_numel(), 81);
  const auto weight = rounded_values<T>(s.weight_numel(), 82);
  const auto grad_output = rounded_values<T>(s.output_numel(), 83);
  const ConvResults<float> reference =
      cpu_conv(s, {input.exact, weight.exact, std::vector<float>(), grad_output.exact}, false);
  s.format = MemoryFormat::ChannelsLast;
  const std::int64_t oh = s.out_height(), ow = s.out_width();
  DeviceBuffer<T> x(to_channels_last(input.typed, s.batch, s.in_channels, s.in_height, s.in_width));
  DeviceBuffer<T> w(to_channels_last(weight.typed, s.out_channels, s.in_channels, s.kernel_h, s.kernel_w));
  DeviceBuffer<T> dy(to_channels_last(grad_output.typed, s.batch, s.out_channels, oh, ow));
  DeviceBuffer<T> y(s.output_numel()), dw(s.weight_numel());
  const Context ctx = gpu_context();
  const DType dtype = DTypeOf<T>::value;
  cuda::conv2d_im2col_forward(ctx, s, dtype, x.get(), w.get(), y.get(), column_bytes);
  cuda::conv2d_im2col_backward_weight(ctx, s, dtype, dy.get(), x.get(), dw.get(), column_bytes);
  const std::string what = "chunked (" + std::to_string(column_bytes) + " B) " + describe(s, dtype, s.format);
  const double window = static_cast<double>(s.kernel_h * s.kernel_w * s.in_channels);
  const double pixels = static_cast<double>(s.batch * oh * ow);
  expect_near_reference(from_channels_last(y.download(), s.batch, s.out_channels, oh, ow), reference.output,
                        tolerance_for<T>(reference.output, window), what + " output");
  expect_near_reference(from_channels_last(dw.download(), s.out_channels, s.in_channels, s.kernel_h, s.kernel_w),
                        reference.grad_weight, tolerance_for<T>(reference.grad_weight, pixels), what + " grad_weight");
}

// The weight gradient twice with the same inputs: the same bits.
template <typename T>
void check_weight_gradient_repeats(Conv2dShape s, std::size_t column_bytes) {
  const auto input = rounded_values<T>(s.input_numel(), 91);
  const auto grad_output = rounded_values<T>(s.output_numel(), 92);
  s.format = MemoryFormat::ChannelsLast;
  DeviceBuffer<T> x(to_channels_last(input.typed, s.batch, s.in_channels, s.in_height, s.in_width));
  DeviceBuffer<T> dy(to_channels_last(grad_output.typed, s.batch, s.out_channels, s.out_height(), s.out_width()));
  DeviceBuffer<T> first(s.weight_numel()), second(s.weight_numel());
  const Context ctx = gpu_context();
  const DType dtype = DTypeOf<T>::value;
  cuda::conv2d_im2col_backward_weight(ctx, s, dtype, dy.get(), x.get(), first.get(), column_bytes);
  cuda::conv2d_im2col_backward_weight(ctx, s, dtype, dy.get(), x.get(), second.get(), column_bytes);
  const std::vector<T> a = first.download(), b = second.download();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0) << describe(s, dtype, s.format);
}

}  // namespace

TEST(CudaConv2dIm2col, ShapesMatchNchwAndCpu) {
  SUBLET_SKIP_WITHOUT_GPU("im2col channels-last conv2d against NCHW and the CPU");
  for (Conv2dShape s : im2col_shapes()) {
    Conv2dShape last = s;
    last.format = MemoryFormat::ChannelsLast;
    EXPECT_TRUE(cuda::conv2d_im2col_applies(last, DType::Float32)) << describe(s, DType::Float32, last.format);
    run_case("conv2d " + describe(s, DType::Float32, last.format), [&] { check_against_cpu_and_nchw<float>(s); });
    run_case("conv2d " + describe(s, DType::BFloat16, last.format), [&] { check_against_cpu_and_nchw<BFloat16>(s); });
    run_case("conv2d " + describe(s, DType::Float16, last.format), [&] { check_against_cpu_and_nchw<Float16>(s); });
  }
}

TEST(CudaConv2dIm2col, ChunkedRowsMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("im2col conv2d in chunks of rows against the CPU");
  // 3 * 6 * 5 = 90 output rows of 152 padded columns: 7 rows a chunk gives 13 chunks, the last of 6.
  const Conv2dShape s = conv_shape(3, 3, 12, 10, 5, 7, 7, 2, 3);
  run_case("float32 in chunks", [&] { check_chunked<float>(s, 7 * 152 * sizeof(float)); });
  run_case("bfloat16 in chunks", [&] { check_chunked<BFloat16>(s, 7 * 152 * 2); });
  run_case("float32 in one chunk", [&] { check_chunked<float>(s, cuda::kIm2colColumnBytes); });
  run_case("float32, one row a chunk", [&] { check_chunked<float>(s, 1); });
}

TEST(CudaConv2dIm2col, SplitKInsideChunksMatchesTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("im2col conv2d weight gradient split into slices within chunks against the CPU");
  // 5 * 20 * 18 = 1800 rows of 152 padded columns (ops/cuda/split_k_plan.h: slices of 256 rows).
  const Conv2dShape s = conv_shape(5, 3, 40, 36, 8, 7, 7, 2, 3);
  constexpr std::size_t kRow = 152;
  // Chunks of 700, 700, 400 rows: 2 slices + a tail of 188, then 1 slice + a tail of 144.
  run_case("float32, chunks of 700 rows", [&] { check_chunked<float>(s, 700 * kRow * sizeof(float)); });
  run_case("float16, chunks of 700 rows", [&] { check_chunked<Float16>(s, 700 * kRow * 2); });
  // Chunks of 512 rows (2 slices, no tail) and a last one of 264 (1 slice + a tail of 8).
  run_case("float32, chunks of 512 rows", [&] { check_chunked<float>(s, 512 * kRow * sizeof(float)); });
  run_case("bfloat16, chunks of 512 rows", [&] { check_chunked<BFloat16>(s, 512 * kRow * 2); });
  // The benchmarks' case: ResNet-18's stem at 32x32, batch 128: 32768 rows, 128 slices of 256.
  const Conv2dShape stem = conv_shape(128, 3, 32, 32, 64, 7, 7, 2, 3);
  run_case("float32 ResNet-18 stem, batch 128", [&] { check_chunked<float>(stem, cuda::kIm2colColumnBytes); });
}

TEST(CudaConv2dIm2col, WeightGradientIsBitIdenticalAcrossRuns) {
  SUBLET_SKIP_WITHOUT_GPU("im2col conv2d weight gradient run twice");
  const Conv2dShape stem = conv_shape(128, 3, 32, 32, 64, 7, 7, 2, 3);
  run_case("float32 stem in one chunk", [&] { check_weight_gradient_repeats<float>(stem, cuda::kIm2colColumnBytes); });
  run_case("bfloat16 stem in chunks of 3000 rows",
           [&] { check_weight_gradient_repeats<BFloat16>(stem, 3000 * 152 * 2); });
}
