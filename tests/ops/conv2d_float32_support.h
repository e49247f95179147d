#pragma once
// What the float32 CPU convolution kernel tests (test_conv2d_winograd, test_conv2d_stride2) share:
// named 3x3 padding-1 shapes, and each pass run in float32 or float64 on the same float64 data
// (float32 results widened back to double), and the comparisons of the two (max_relative_error,
// NaN-safe) that both tests make.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn_test_support.h"
#include "ops/conv2d.h"

namespace sublet::ops::testing {

struct NamedShape {
  std::string name;
  Conv2dShape shape;
};

// A 3x3 convolution with padding 1: stride 1 keeps the plane, stride 2 halves it.
inline Conv2dShape conv3x3(std::int64_t batch, std::int64_t channels, std::int64_t height, std::int64_t width,
                           std::int64_t out_channels, std::int64_t stride = 1) {
  Conv2dShape s;
  s.batch = batch;
  s.in_channels = channels;
  s.in_height = height;
  s.in_width = width;
  s.out_channels = out_channels;
  s.kernel_h = s.kernel_w = 3;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = 1;
  return s;
}

inline std::vector<double> forward(const Conv2dShape& s, DType dtype, const std::vector<double>& input,
                                   const std::vector<double>& weight, const std::vector<double>* bias) {
  if (dtype == DType::Float64) {
    std::vector<double> out(static_cast<std::size_t>(s.output_numel()));
    conv2d_forward(cpu_context(), s, dtype, input.data(), weight.data(), bias ? bias->data() : nullptr, out.data());
    return out;
  }
  const auto in = cast_values<float>(input), w = cast_values<float>(weight);
  const auto b = bias ? cast_values<float>(*bias) : std::vector<float>();
  std::vector<float> out(static_cast<std::size_t>(s.output_numel()));
  conv2d_forward(cpu_context(), s, dtype, in.data(), w.data(), bias ? b.data() : nullptr, out.data());
  return cast_values<double>(out);
}

inline std::vector<double> input_gradient(const Conv2dShape& s, DType dtype, const std::vector<double>& grad_output,
                                          const std::vector<double>& weight) {
  if (dtype == DType::Float64) {
    std::vector<double> out(static_cast<std::size_t>(s.input_numel()));
    conv2d_backward_input(cpu_context(), s, dtype, grad_output.data(), weight.data(), out.data());
    return out;
  }
  const auto g = cast_values<float>(grad_output), w = cast_values<float>(weight);
  std::vector<float> out(static_cast<std::size_t>(s.input_numel()));
  conv2d_backward_input(cpu_context(), s, dtype, g.data(), w.data(), out.data());
  return cast_values<double>(out);
}

struct WeightGradients {
  std::vector<double> weight, bias;
};

inline WeightGradients weight_gradients(const Conv2dShape& s, DType dtype, const std::vector<double>& grad_output,
                                        const std::vector<double>& input, bool with_bias) {
  if (dtype == DType::Float64) {
    WeightGradients out{std::vector<double>(static_cast<std::size_t>(s.weight_numel())),
                        std::vector<double>(static_cast<std::size_t>(s.out_channels))};
    conv2d_backward_weight(cpu_context(), s, dtype, grad_output.data(), input.data(), out.weight.data(),
                           with_bias ? out.bias.data() : nullptr);
    return out;
  }
  const auto g = cast_values<float>(grad_output), in = cast_values<float>(input);
  std::vector<float> gw(static_cast<std::size_t>(s.weight_numel())), gb(static_cast<std::size_t>(s.out_channels));
  conv2d_backward_weight(cpu_context(), s, dtype, g.data(), in.data(), gw.data(), with_bias ? gb.data() : nullptr);
  return {cast_values<double>(gw), cast_values<double>(gb)};
}

// Forward with and without bias and the input gradient, float32 against float64, on random data
// drawn from four seeds starting at `seed` (advanced past them).
inline void expect_forward_and_input_gradient_match(const Conv2dShape& s, std::uint64_t& seed, double tolerance) {
  const auto input = random_values(s.input_numel(), seed++);
  const auto weight = random_values(s.weight_numel(), seed++);
  const auto bias = random_values(s.out_channels, seed++);
  const auto grad_output = random_values(s.output_numel(), seed++);
  EXPECT_LE(max_relative_error(forward(s, DType::Float32, input, weight, &bias),
                               forward(s, DType::Float64, input, weight, &bias)), tolerance);
  EXPECT_LE(max_relative_error(forward(s, DType::Float32, input, weight, nullptr),
                               forward(s, DType::Float64, input, weight, nullptr)), tolerance);
  EXPECT_LE(max_relative_error(input_gradient(s, DType::Float32, grad_output, weight),
                               input_gradient(s, DType::Float64, grad_output, weight)), tolerance);
}

// The weight and bias gradients, float32 against float64, and the float32 weight gradient bit
// for bit the same without the bias gradient. Returns the float32 gradients (with the bias).
inline WeightGradients expect_weight_gradients_match(const Conv2dShape& s, const std::vector<double>& grad_output,
                                                     const std::vector<double>& input, double tolerance) {
  const WeightGradients expected = weight_gradients(s, DType::Float64, grad_output, input, true);
  const WeightGradients actual = weight_gradients(s, DType::Float32, grad_output, input, true);
  EXPECT_LE(max_relative_error(actual.weight, expected.weight), tolerance);
  EXPECT_LE(max_relative_error(actual.bias, expected.bias), tolerance);
  EXPECT_EQ(weight_gradients(s, DType::Float32, grad_output, input, false).weight, actual.weight);
  return actual;
}

}  // namespace sublet::ops::testing
