// conv2d on channels-last (NHWC activations, [OC, KH, KW, C/g] weight; ops/conv2d.h) on the GPU,
// for float32, bfloat16 and float16: the data is permuted on the host, run through the kernels
// registered under MemoryFormat::ChannelsLast (cuDNN's NHWC engines, bias terms in
// ops/cuda/conv2d_bias.cu), the results permuted back and compared
//  - with the float32 CPU kernel on the same (16-bit-rounded) inputs, at the tolerance per dtype
//    of tests/ops/low_precision_gpu_support.h (float32 rtol 1e-4 + 1e-6 per term; bfloat16 rtol
//    2^-7 + 1e-2 of the largest magnitude; float16 rtol 2^-10 + 2e-3 of it), and
//  - with the NCHW GPU kernels on the same data, at twice that tolerance (each is within it of
//    the reference; the layouts run different cuDNN engines, so the bits may differ).
// Forward with and without bias, backward-input, backward-weight and bias gradient, over the
// shapes of low_precision_gpu_support.h. NaN and infinity fail.
#include <gtest/gtest.h>

#include "low_precision_gpu_support.h"
#include "ops/conv2d_kernels.h"
#include "ops/conv_settings.h"
#include "ops/cuda/conv2d_single_tap.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename T>
void check(const Conv2dShape& s, bool with_bias) {
  const auto input = rounded_values<T>(s.input_numel(), 91);
  const auto weight = rounded_values<T>(s.weight_numel(), 92);
  const auto bias = rounded_values<T>(s.out_channels, 93);
  const auto grad_output = rounded_values<T>(s.output_numel(), 94);
  const ConvData<T> typed{input.typed, weight.typed, bias.typed, grad_output.typed};
  const ConvResults<float> reference =
      cpu_conv(s, {input.exact, weight.exact, bias.exact, grad_output.exact}, with_bias);
  const std::string what = "conv2d " + describe(s, DTypeOf<T>::value, MemoryFormat::ChannelsLast) +
                           (with_bias ? "" : " (no bias)");
  const ConvResults<T> channels_last = gpu_conv(s, MemoryFormat::ChannelsLast, typed, with_bias);
  expect_conv_near(s, channels_last, reference, what + " vs float32 CPU");
  const ConvResults<T> nchw = gpu_conv(s, MemoryFormat::Contiguous, typed, with_bias);
  expect_conv_near(s, channels_last, as_float(nchw), what + " vs the NCHW GPU kernels", 2.0);
}

template <typename T>
void check_all_shapes() {
  for (const Conv2dShape& s : low_precision_conv_shapes()) {
    run_case("conv2d " + describe(s, DTypeOf<T>::value, MemoryFormat::ChannelsLast), [&] { check<T>(s, true); });
  }
  check<T>(low_precision_conv_shapes()[1], false);
}

// Shapes where one kernel tap meets the whole input: cuBLAS GEMMs in channels-last
// (ops/cuda/conv2d_single_tap.h), cuDNN in the NCHW comparison (but the last, a GEMM in both).
std::vector<Conv2dShape> single_tap_shapes() {
  return {
      conv_shape(6, 24, 1, 1, 40, 3, 3, 1, 1),     // 3x3 padding 1 on a 1x1 plane (ResNet-18 at 32x32, layer 4)
      conv_shape(5, 16, 1, 1, 8, 3, 3, 2, 1),      // the same with stride 2
      conv_shape(4, 16, 2, 2, 24, 1, 1, 2, 0),     // 1x1 stride 2 keeping pixel (0, 0) of a 2x2 plane
      conv_shape(3, 8, 1, 1, 8, 5, 5, 1, 2),       // 5x5: tap (2, 2)
      conv_shape(3, 8, 1, 1, 16, 3, 3, 1, 2, 2),   // dilation 2: tap (1, 1)
      conv_shape(7, 12, 1, 1, 20, 1, 1, 1, 0),     // 1x1 on a 1x1 plane
  };
}

}  // namespace

TEST(CudaConv2dChannelsLast, KernelsAreRegistered) {
  SUBLET_SKIP_WITHOUT_GPU("the CUDA channels-last conv2d kernels");
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    EXPECT_TRUE(conv2d_forward_kernels().has(DeviceType::CUDA, dtype, MemoryFormat::ChannelsLast)) << dtype_name(dtype);
    EXPECT_TRUE(conv2d_backward_input_kernels().has(DeviceType::CUDA, dtype, MemoryFormat::ChannelsLast))
        << dtype_name(dtype);
    EXPECT_TRUE(conv2d_backward_weight_kernels().has(DeviceType::CUDA, dtype, MemoryFormat::ChannelsLast))
        << dtype_name(dtype);
  }
}

TEST(CudaConv2dChannelsLast, Float32MatchesNchwAndCpu) {
  SUBLET_SKIP_WITHOUT_GPU("float32 channels-last conv2d against NCHW and the CPU");
  check_all_shapes<float>();
}

TEST(CudaConv2dChannelsLast, BFloat16MatchesNchwAndCpu) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 channels-last conv2d against NCHW and the CPU");
  check_all_shapes<BFloat16>();
}

TEST(CudaConv2dChannelsLast, Float16MatchesNchwAndCpu) {
  SUBLET_SKIP_WITHOUT_GPU("float16 channels-last conv2d against NCHW and the CPU");
  check_all_shapes<Float16>();
}

TEST(CudaConv2dChannelsLast, SingleTapShapesMatchNchwAndCpu) {
  SUBLET_SKIP_WITHOUT_GPU("single-tap channels-last conv2d (cuBLAS GEMMs) against NCHW and the CPU");
  for (const Conv2dShape& s : single_tap_shapes()) {
    Conv2dShape last = s;
    last.format = MemoryFormat::ChannelsLast;
    EXPECT_TRUE(cuda::conv2d_single_tap_applies(last, DType::Float32)) << describe(s, DType::Float32, last.format);
    run_case("conv2d " + describe(s, DType::Float32, last.format), [&] { check<float>(s, true); });
    run_case("conv2d " + describe(s, DType::BFloat16, last.format), [&] { check<BFloat16>(s, true); });
    run_case("conv2d " + describe(s, DType::Float16, last.format), [&] { check<Float16>(s, false); });
  }
}

TEST(CudaConv2dChannelsLast, BenchmarkedEnginesMatch) {
  SUBLET_SKIP_WITHOUT_GPU("timed engine choice for channels-last conv2d");
  const ConvAlgorithmSettings saved = conv_algorithm_settings();
  set_conv_algorithm_settings({.benchmark = true, .allow_tf32 = false});
  const Conv2dShape resnet_like = low_precision_conv_shapes()[7];
  run_case("benchmarked channels-last conv2d", [&] {
    check<float>(resnet_like, true);
    check<BFloat16>(resnet_like, true);
    check<Float16>(resnet_like, true);
  });
  set_conv_algorithm_settings(saved);
}
