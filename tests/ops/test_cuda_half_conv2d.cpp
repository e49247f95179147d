// cuDNN conv2d in bfloat16 and float16 (NCHW; ops/cuda/conv2d_cuda.cpp: 16-bit operands, float32
// accumulation; bias terms in ops/cuda/conv2d_bias.cu) against the float32 CPU kernel run on the
// same 16-bit-rounded inputs: forward (with and without bias), backward-input, backward-weight
// and the bias gradient, over tests/ops/low_precision_gpu_support.h's shapes (3x3 and 1x1,
// stride 2, padding, odd sizes, groups, depthwise, dilation, an 8192-term weight gradient).
// Tolerances per dtype (low_precision_gpu_support.h): bfloat16 rtol 2^-7 + 1e-2 of the output's
// largest magnitude, float16 rtol 2^-10 + 2e-3 of it; NaN and infinity fail.
#include <gtest/gtest.h>

#include "low_precision_gpu_support.h"
#include "ops/conv_settings.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename T>
void check(const Conv2dShape& s, bool with_bias) {
  const auto input = rounded_values<T>(s.input_numel(), 81);
  const auto weight = rounded_values<T>(s.weight_numel(), 82);
  const auto bias = rounded_values<T>(s.out_channels, 83);
  const auto grad_output = rounded_values<T>(s.output_numel(), 84);
  const ConvResults<float> reference =
      cpu_conv(s, {input.exact, weight.exact, bias.exact, grad_output.exact}, with_bias);
  const ConvResults<T> got =
      gpu_conv<T>(s, MemoryFormat::Contiguous, {input.typed, weight.typed, bias.typed, grad_output.typed}, with_bias);
  expect_conv_near(s, got, reference,
                   "conv2d " + describe(s, DTypeOf<T>::value, MemoryFormat::Contiguous) + (with_bias ? "" : " (no bias)"));
}

template <typename T>
void check_all_shapes() {
  for (const Conv2dShape& s : low_precision_conv_shapes()) {
    run_case("conv2d " + describe(s, DTypeOf<T>::value, MemoryFormat::Contiguous), [&] { check<T>(s, true); });
  }
  check<T>(low_precision_conv_shapes()[1], false);  // no bias: the plain convolution, grad_bias omitted
}

}  // namespace

TEST(CudaHalfConv2d, BFloat16MatchesFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 cuDNN conv2d against the float32 CPU kernel");
  check_all_shapes<BFloat16>();
}

TEST(CudaHalfConv2d, Float16MatchesFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("float16 cuDNN conv2d against the float32 CPU kernel");
  check_all_shapes<Float16>();
}

// With cudnn.benchmark-style timing other engines are chosen (nondeterministic ones allowed):
// they must keep float32 accumulation too.
TEST(CudaHalfConv2d, BenchmarkedEnginesMatchFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("timed engine choice for 16-bit conv2d");
  const ConvAlgorithmSettings saved = conv_algorithm_settings();
  set_conv_algorithm_settings({.benchmark = true, .allow_tf32 = false});
  const Conv2dShape resnet_like = low_precision_conv_shapes()[7], long_sum = low_precision_conv_shapes()[8];
  run_case("benchmarked conv2d", [&] {
    check<BFloat16>(resnet_like, true);
    check<BFloat16>(long_sum, true);
    check<Float16>(resnet_like, true);
    check<Float16>(long_sum, true);
  });
  set_conv_algorithm_settings(saved);
}
