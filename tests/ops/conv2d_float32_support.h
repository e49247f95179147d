#pragma once
// What the float32 CPU convolution kernel tests (test_conv2d_winograd, test_conv2d_stride2) share:
// named 3x3 padding-1 shapes, and each pass run in float32 or float64 on the same float64 data
// (float32 results widened back to double), so a test compares the two with max_relative_error.
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

}  // namespace sublet::ops::testing
