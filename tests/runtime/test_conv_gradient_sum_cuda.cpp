// A convolution's input gradient added into the gradient already collected for its input (a
// residual block's shortcut), on the GPU:
//  - ops::conv2d_backward_input_accumulate (cuDNN's graph API and the single-tap GEMM with beta
//    = 1) gives existing + conv2d_backward_input's result, for float64 and float32 NCHW, float32
//    and bfloat16 channels-last, single-tap shapes, and with timed engine choice (whose timing
//    runs must not add into the sum). Tolerance: float64 1e-12, float32 1e-5, bfloat16 2^-6 of
//    the largest magnitude (the sum is rounded once instead of twice); adding nothing, or twice,
//    misses by about the magnitude of `existing` (values in [-1, 1]). NaN fails;
//  - in a backward pass, conv(h) + 2h: the convolution's node is offered h's gradient (the
//    shortcut's 2g, collected first) and returns that very buffer, summed; x's gradient is the
//    CPU's (1e-5 of the largest).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/conv2d.h"
#include "ops/conv_settings.h"
#include "runtime/autograd/function.h"
#include "runtime/factories.h"
#include "runtime/kernel_args.h"
#include "runtime/nn/functional.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"
#include "tests/nan_safe_max.h"

namespace sublet {
namespace {

ops::Conv2dShape shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                       std::int64_t kernel, std::int64_t stride, std::int64_t pad, MemoryFormat format) {
  ops::Conv2dShape s;
  s.batch = n;
  s.in_channels = c;
  s.in_height = h;
  s.in_width = w;
  s.out_channels = k;
  s.kernel_h = s.kernel_w = kernel;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  s.format = format;
  return s;
}

Tensor uniform_on_gpu(const Shape& sizes, DType dtype, MemoryFormat format, std::uint64_t seed) {
  Generator g(seed);
  return (rand(sizes, g, TensorOptions().dtype(DType::Float64)) * 2.0 - 1.0)
      .to(dtype)
      .to(Device::cuda(0))
      .contiguous(format);
}

std::vector<double> host_values(const Tensor& t) {
  return t.contiguous().to(DType::Float64).to(Device::cpu()).to_vector<double>();
}

void expect_sum(const ops::Conv2dShape& s, DType dtype, double tolerance) {
  const std::string what = std::string(dtype_name(dtype)) + " " + memory_format_name(s.format) + " N" +
                           std::to_string(s.batch) + " C" + std::to_string(s.in_channels) + " " +
                           std::to_string(s.in_height) + "x" + std::to_string(s.in_width) + " K" +
                           std::to_string(s.out_channels) + " k" + std::to_string(s.kernel_h) + " s" +
                           std::to_string(s.stride_h);
  const Tensor grad_output =
      uniform_on_gpu({s.batch, s.out_channels, s.out_height(), s.out_width()}, dtype, s.format, 1);
  const Tensor weight = uniform_on_gpu({s.out_channels, s.in_channels, s.kernel_h, s.kernel_w}, dtype, s.format, 2);
  const Tensor existing = uniform_on_gpu({s.batch, s.in_channels, s.in_height, s.in_width}, dtype, s.format, 3);
  const ops::Context ctx = sublet::detail::context_for(existing);
  Tensor alone = Tensor::empty(existing.sizes(), existing.options(), s.format);
  ops::conv2d_backward_input(ctx, s, dtype, grad_output.data_ptr(), weight.data_ptr(), alone.data_ptr());
  Tensor summed = existing.clone();
  ASSERT_TRUE(ops::conv2d_backward_input_accumulate(ctx, s, dtype, grad_output.data_ptr(), weight.data_ptr(),
                                                    summed.data_ptr()))
      << what << ": no accumulating pass";
  const std::vector<double> a = host_values(alone), e = host_values(existing), got = host_values(summed);
  double largest = 0, worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::fabs(a[i]) + std::fabs(e[i]));
  for (std::size_t i = 0; i < a.size(); ++i) worst = testing::nan_safe_max(worst, std::fabs(got[i] - (e[i] + a[i])));
  EXPECT_LE(worst, tolerance * largest) << what << " (largest magnitude " << largest << ")";
}

std::vector<ops::Conv2dShape> resnet_shapes(MemoryFormat format) {
  return {shape(8, 16, 8, 8, 16, 3, 1, 1, format),    // a block's first convolution
          shape(8, 16, 8, 8, 32, 3, 2, 1, format),    // ...the first of a stage
          shape(8, 16, 8, 8, 32, 1, 2, 0, format)};   // a downsample
}

TEST(ConvGradientSum, AccumulatingPassAddsOnceNchw) {
  SUBLET_SKIP_WITHOUT_GPU("conv2d's accumulating input gradient");
  for (const auto& s : resnet_shapes(MemoryFormat::Contiguous)) {
    expect_sum(s, DType::Float64, 1e-12);
    expect_sum(s, DType::Float32, 1e-5);
  }
}

TEST(ConvGradientSum, AccumulatingPassAddsOnceChannelsLast) {
  SUBLET_SKIP_WITHOUT_GPU("conv2d's accumulating input gradient in channels-last");
  for (const auto& s : resnet_shapes(MemoryFormat::ChannelsLast)) {
    expect_sum(s, DType::Float32, 1e-5);
    expect_sum(s, DType::BFloat16, 1.0 / 64);
  }
  // Single-tap GEMMs (ops/cuda/conv2d_single_tap.h): a 3x3 on a 1x1 plane, a 1x1 stride 2 on 2x2.
  expect_sum(shape(6, 24, 1, 1, 40, 3, 1, 1, MemoryFormat::ChannelsLast), DType::Float32, 1e-5);
  expect_sum(shape(4, 16, 2, 2, 24, 1, 2, 0, MemoryFormat::ChannelsLast), DType::Float32, 1e-5);
}

TEST(ConvGradientSum, TimedEngineChoiceAddsOnce) {
  SUBLET_SKIP_WITHOUT_GPU("conv2d's accumulating input gradient with benchmarked engines");
  const ops::ConvAlgorithmSettings saved = ops::conv_algorithm_settings();
  ops::set_conv_algorithm_settings({.benchmark = true, .allow_tf32 = false});
  // Shapes of their own: a plan chosen without timing would be reused from the cache.
  expect_sum(shape(4, 8, 12, 12, 24, 3, 1, 1, MemoryFormat::ChannelsLast), DType::Float32, 1e-5);
  expect_sum(shape(4, 8, 12, 12, 24, 3, 1, 1, MemoryFormat::Contiguous), DType::Float32, 1e-5);
  ops::set_conv_algorithm_settings(saved);
}

// x -> h = 1.5 x -> conv(h) + 2 h; returns x's gradient and whether the convolution's input
// gradient is the buffer that held the shortcut's (the sum made in place).
std::pair<std::vector<double>, bool> residual_gradient(Device device, MemoryFormat format) {
  Tensor x = uniform_on_gpu({4, 8, 6, 6}, DType::Float32, format, 7).to(device).detach();
  x.requires_grad_(true);
  const Tensor weight = uniform_on_gpu({8, 8, 3, 3}, DType::Float32, format, 8).to(device);
  const Tensor h = x * 1.5;
  // In this order (the operands of + may be evaluated either way): the shortcut's node is
  // created after the convolution's, so backward runs it first.
  const Tensor branch = nn::functional::conv2d(h, weight, {}, nn::functional::Conv2dFuncOptions().padding(1));
  const Tensor shortcut_out = h * 2.0;
  const Tensor out = branch + shortcut_out;
  const void* shortcut = nullptr;
  const void* convolution = nullptr;
  const auto& add_inputs = out.grad_fn()->next_edges();
  // The shortcut's node (h * 2, created later) runs first: its gradient for h is collected first.
  add_inputs[1].node->register_post_hook(
      [&](const autograd::TensorList& grad_inputs, const autograd::TensorList&) { shortcut = grad_inputs[0].data_ptr(); });
  add_inputs[0].node->register_post_hook([&](const autograd::TensorList& grad_inputs, const autograd::TensorList&) {
    convolution = grad_inputs[0].data_ptr();
  });
  // The incoming gradient in the step's layout (sum()'s would be an expanded scalar, and the
  // shortcut's gradient made from it NCHW, which a channels-last pass cannot add into).
  autograd::backward({out}, {uniform_on_gpu(out.sizes(), DType::Float32, format, 9).to(device)});
  return {host_values(x.grad()), shortcut != nullptr && convolution == shortcut};
}

TEST(ConvGradientSum, ResidualGradientIsSummedInPlaceAndMatchesTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("a residual gradient summed by the convolution");
  const auto [cpu, cpu_in_place] = residual_gradient(Device::cpu(), MemoryFormat::Contiguous);
  EXPECT_FALSE(cpu_in_place) << "the CPU has no accumulating pass";
  for (MemoryFormat format : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    const auto [gpu, in_place] = residual_gradient(Device::cuda(0), format);
    EXPECT_TRUE(in_place) << memory_format_name(format) << ": the convolution did not add into the shortcut's gradient";
    double worst = 0, largest = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      largest = std::max(largest, std::fabs(cpu[i]));
      worst = testing::nan_safe_max(worst, std::fabs(gpu[i] - cpu[i]));
    }
    EXPECT_LE(worst, 1e-5 * largest) << memory_format_name(format);
  }
}

}  // namespace
}  // namespace sublet
