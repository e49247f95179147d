// The float32 Winograd F(2x2, 3x3) convolution (ops/cpu/conv2d_winograd_cpu.h): forward with and
// without bias, the input gradient that conv2d_backward_input runs through it (a 3x3 stride-1
// padding-1 convolution of grad_output with the flipped weight), and the weight and bias
// gradients (conv2d_winograd_weight_cpu.cpp), against the float64
// kernels (themselves checked against a naive loop and finite differences in test_conv2d), on
// random data: odd and even planes, planes wider than 16 tiles, a batch of one, an item of
// images cut short, channel counts that are not multiples of 4, 8 or 16.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conv2d_float32_support.h"
#include "core/tuning.h"
#include "ops/cpu/conv2d_avx512_tiles.h"
#include "ops/cpu/conv2d_winograd_cpu.h"

namespace sublet::ops {
namespace {

using testing::forward;
using testing::max_relative_error;
using testing::NamedShape;
using testing::random_values;
using testing::weight_gradients;

// max |float32 - float64| / max |float64| over a whole output. The direct float32 kernels meet
// 1e-5 in test_conv2d (sums of up to 576 products of values in [-1, 1]); Winograd's transforms
// add a few roundings per output, well within the same bound.
constexpr double kTolerance = 1e-5;

Conv2dShape same_3x3(std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width,
                     std::int64_t out_channels) {
  return testing::conv3x3(batch, channels, height, width, out_channels);
}

std::vector<NamedShape> shapes() {
  return {
      // ResNet-20's last stage: 16 tiles an image, several images an item, the last item short.
      {"7x7_64_batch5", same_3x3(5, 64, 7, 7, 64)},
      // 9 quads of output channels (the last register tile one quad), 49 tiles an image.
      {"14x14_32_to_36", same_3x3(4, 32, 14, 14, 36)},
      // Odd and unequal sides, 33 and 34 channels (a quad of 2), one image (no threads).
      {"5x9_33_to_34_batch1", same_3x3(1, 33, 5, 9, 34)},
      // 19 tiles a row: a second vector of tiles, mostly masked; 35 output channels.
      {"38x37_32_to_35", same_3x3(2, 32, 38, 37, 35)},
      // Planes smaller than one tile's 4x4 input block.
      {"2x3_40", same_3x3(3, 40, 2, 3, 40)},
      // Odd channel counts on a small odd plane.
      {"9x7_33", same_3x3(2, 33, 9, 7, 33)},
      // Whole-plane transforms (planes up to 8x8): 16 tiles an image, and 3x3 tiles (9 of a
      // vector's 16 lanes) with blocks of 5 images and a short last item.
      {"8x8_32_batch3", same_3x3(3, 32, 8, 8, 32)},
      {"5x6_32_to_36_batch7", same_3x3(7, 32, 5, 6, 36)},
  };
}

// The weight gradient runs from 16 channels and 100 pixels: ResNet-20's first stage, 17 and 20
// channels (short last groups of 3 input channels and of 8 gradient rows) at odd sides and one
// image, 9 quads, 19 tiles a row, and an odd plane over 5 images (items of unequal length).
std::vector<NamedShape> weight_gradient_shapes() {
  return {
      {"28x28_16_batch6", same_3x3(6, 16, 28, 28, 16)},
      {"11x13_17_to_20_batch1", same_3x3(1, 17, 11, 13, 20)},
      {"14x14_32_to_36", same_3x3(4, 32, 14, 14, 36)},
      {"38x37_32_to_35", same_3x3(2, 32, 38, 37, 35)},
      {"13x9_40_batch5", same_3x3(5, 40, 13, 9, 40)},
      {"11x15_17_to_19", same_3x3(3, 17, 11, 15, 19)},  // odd channel counts
  };
}

// Makes conv2d_winograd_applies() false for a scope, so the direct kernels run.
class WinogradAllowed {
 public:
  explicit WinogradAllowed(bool allowed) { cpu::set_winograd_allowed(allowed); }
  ~WinogradAllowed() { cpu::set_winograd_allowed(true); }
  WinogradAllowed(const WinogradAllowed&) = delete;
  WinogradAllowed& operator=(const WinogradAllowed&) = delete;
};

// The flipped weight's convolution has the channel counts swapped.
Conv2dShape transposed(Conv2dShape s) {
  std::swap(s.in_channels, s.out_channels);
  return s;
}

TEST(Conv2dWinograd, ForwardAndInputGradientMatchFloat64) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the Winograd kernel does not run";
  std::uint64_t seed = 700;
  for (const auto& [name, s] : shapes()) {
    SCOPED_TRACE(name);
    // Otherwise the direct kernels would be what passes.
    ASSERT_TRUE(cpu::conv2d_winograd_applies(s));
    ASSERT_TRUE(cpu::conv2d_winograd_applies(transposed(s)));
    testing::expect_forward_and_input_gradient_match(s, seed, kTolerance);
  }
}

TEST(Conv2dWinograd, WeightAndBiasGradientsMatchFloat64) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the Winograd kernel does not run";
  std::uint64_t seed = 800;
  for (const auto& [name, s] : weight_gradient_shapes()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(cpu::conv2d_winograd_weight_gradient_applies(s));
    const auto input = random_values(s.input_numel(), seed++);
    const auto grad_output = random_values(s.output_numel(), seed++);
    testing::expect_weight_gradients_match(s, grad_output, input, kTolerance);
  }
}

TEST(Conv2dWinograd, WeightGradientDoesNotDependOnTheRun) {
  // Items are summed per thread in a fixed order and the threads' sums in thread order: two runs
  // give the same bits (resuming a training run relies on it).
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the Winograd kernel does not run";
  const Conv2dShape s = weight_gradient_shapes()[0].shape;
  const auto input = random_values(s.input_numel(), 31), grad_output = random_values(s.output_numel(), 32);
  EXPECT_EQ(weight_gradients(s, DType::Float32, grad_output, input, true).weight,
            weight_gradients(s, DType::Float32, grad_output, input, true).weight);
}

TEST(Conv2dWinograd, AgreesWithTheDirectFloat32Kernels) {
  if (!cpu::cpu_has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU: the Winograd kernel does not run";
  const Conv2dShape s = shapes()[1].shape;  // both kernels run on it
  const auto input = random_values(s.input_numel(), 91), weight = random_values(s.weight_numel(), 92);
  const auto bias = random_values(s.out_channels, 93);
  const auto grad_output = random_values(s.output_numel(), 94);
  const auto winograd = forward(s, DType::Float32, input, weight, &bias);
  const auto winograd_weight = weight_gradients(s, DType::Float32, grad_output, input, true).weight;
  std::vector<double> direct, direct_weight;
  {
    const WinogradAllowed off(false);
    ASSERT_FALSE(cpu::conv2d_winograd_applies(s));
    ASSERT_FALSE(cpu::conv2d_winograd_weight_gradient_applies(s));
    direct = forward(s, DType::Float32, input, weight, &bias);
    direct_weight = weight_gradients(s, DType::Float32, grad_output, input, true).weight;
  }
  EXPECT_LE(max_relative_error(winograd, direct), kTolerance);
  EXPECT_NE(winograd, direct) << "the same bits: the Winograd kernel probably did not run";
  EXPECT_LE(max_relative_error(winograd_weight, direct_weight), kTolerance);
  EXPECT_NE(winograd_weight, direct_weight) << "the same bits: the Winograd kernel probably did not run";
}

TEST(Conv2dWinograd, AppliesOnlyToItsShapesAndWithAvx512) {
  Conv2dShape s = shapes()[1].shape;
  const bool avx512 = cpu::cpu_has_avx512();
  EXPECT_EQ(cpu::conv2d_winograd_applies(shapes()[0].shape), avx512);  // 7x7: the forward only
  EXPECT_FALSE(cpu::conv2d_winograd_weight_gradient_applies(shapes()[0].shape));
  EXPECT_EQ(cpu::conv2d_winograd_applies(s), avx512);
  EXPECT_EQ(cpu::conv2d_winograd_weight_gradient_applies(s), avx512);
  {
    const WinogradAllowed off(false);
    EXPECT_FALSE(cpu::conv2d_winograd_applies(s));
    EXPECT_FALSE(cpu::conv2d_winograd_weight_gradient_applies(s));
  }
  {
    const ScopedTuning no_avx512([](TuningOptions& o) { o.cpu_avx512 = false; });
    EXPECT_FALSE(cpu::conv2d_winograd_applies(s)) << "the AVX2 build's kernels must run with AVX-512 off";
    EXPECT_FALSE(cpu::conv2d_winograd_weight_gradient_applies(s));
  }
  Conv2dShape strided = s;
  strided.stride_h = strided.stride_w = 2;
  Conv2dShape grouped = s;
  grouped.groups = 2;
  Conv2dShape few_channels = s;
  few_channels.in_channels = 16;  // the forward needs 32, the weight gradient 16
  EXPECT_EQ(cpu::conv2d_winograd_weight_gradient_applies(few_channels), avx512);
  Conv2dShape fewer_channels = s;
  fewer_channels.out_channels = 8;
  EXPECT_FALSE(cpu::conv2d_winograd_weight_gradient_applies(fewer_channels));
  Conv2dShape unpadded = s;
  unpadded.pad_h = 0;
  Conv2dShape five = s;
  five.kernel_h = five.kernel_w = 5;
  five.pad_h = five.pad_w = 2;
  for (const Conv2dShape& other : {strided, grouped, few_channels, unpadded, five}) {
    EXPECT_FALSE(cpu::conv2d_winograd_applies(other));
  }
  for (const Conv2dShape& other : {strided, grouped, unpadded, five}) {
    EXPECT_FALSE(cpu::conv2d_winograd_weight_gradient_applies(other));
  }
}

}  // namespace
}  // namespace sublet::ops
