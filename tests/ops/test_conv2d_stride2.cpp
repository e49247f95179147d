// The float32 3x3 stride-2 padding-1 convolution through the input's phases
// (ops/cpu/conv2d_stride2_cpu.h): forward with and without bias, the input gradient, and the
// weight and bias gradients (bit for bit the same without the bias gradient, and between runs) against
// the float64 kernels (checked against a naive loop and finite differences in test_conv2d), on
// random data: even and odd sides (a last phase row or column short), non-square planes, a batch
// of one, channel counts that are not multiples of 4 or 8, a plane of one output row, and small
// planes stacked several images to a grid.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conv2d_float32_support.h"
#include "core/tuning.h"
#include "ops/cpu/conv2d_avx512_tiles.h"
#include "ops/cpu/conv2d_stride2_cpu.h"

namespace sublet::ops {
namespace {

using testing::NamedShape;
using testing::random_values;
using testing::weight_gradients;
using testing::WeightGradients;

// As test_conv2d's bound for the float32 kernels: sums of up to 9 * 33 products of values in
// [-1, 1] in float32.
constexpr double kTolerance = 1e-5;

Conv2dShape downsampling(std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width,
                         std::int64_t out_channels) {
  return testing::conv3x3(batch, channels, height, width, out_channels, /*stride=*/2);
}

std::vector<NamedShape> shapes() {
  return {
      {"28x28_16_to_32", downsampling(3, 16, 28, 28, 32)},  // ResNet-20's first downsampling
      {"7x9_9_to_13", downsampling(4, 9, 7, 9, 13)},       // odd sides: short odd phases; 13 channels
      {"12x5_33_to_8_batch1", downsampling(1, 33, 12, 5, 8)},
      {"2x11_8_to_10", downsampling(2, 8, 2, 11, 10)},     // one output row
      // Small planes are stacked several images to a grid (on up to 4 threads): ResNet-20's
      // second downsampling with a last grid short of images, and 4x5 outputs 6 to a grid.
      {"14x14_32_to_64_batch9", downsampling(9, 32, 14, 14, 64)},
      {"7x9_9_to_13_batch24", downsampling(24, 9, 7, 9, 13)},
  };
}

TEST(Conv2dStride2, ForwardAndInputGradientMatchFloat64) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the stride-2 kernel does not run";
  std::uint64_t seed = 900;
  for (const auto& [name, s] : shapes()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(cpu::conv2d_stride2_applies(s));  // otherwise the im2col path would be what passes
    testing::expect_forward_and_input_gradient_match(s, seed, kTolerance);
  }
}

TEST(Conv2dStride2, WeightAndBiasGradientsMatchFloat64) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the stride-2 kernel does not run";
  std::uint64_t seed = 950;
  for (const auto& [name, s] : shapes()) {
    SCOPED_TRACE(name);
    const auto input = random_values(s.input_numel(), seed++);
    const auto grad_output = random_values(s.output_numel(), seed++);
    const WeightGradients actual = testing::expect_weight_gradients_match(s, grad_output, input, kTolerance);
    EXPECT_EQ(weight_gradients(s, DType::Float32, grad_output, input, true).weight, actual.weight);
  }
}

TEST(Conv2dStride2, AppliesOnlyToItsShapesAndWithAvx512) {
  const Conv2dShape s = shapes()[0].shape;
  EXPECT_EQ(cpu::conv2d_stride2_applies(s), cpu::cpu_has_avx512());
  {
    const ScopedTuning no_avx512([](TuningOptions& o) { o.cpu_avx512 = false; });
    EXPECT_FALSE(cpu::conv2d_stride2_applies(s)) << "the im2col path must run with AVX-512 off";
  }
  Conv2dShape stride1 = s;
  stride1.stride_h = stride1.stride_w = 1;
  Conv2dShape pointwise = s;
  pointwise.kernel_h = pointwise.kernel_w = 1;
  pointwise.pad_h = pointwise.pad_w = 0;
  Conv2dShape grouped = s;
  grouped.groups = 2;
  Conv2dShape few_channels = s;
  few_channels.in_channels = 4;
  for (const Conv2dShape& other : {stride1, pointwise, grouped, few_channels}) {
    EXPECT_FALSE(cpu::conv2d_stride2_applies(other));
  }
}

}  // namespace
}  // namespace sublet::ops
