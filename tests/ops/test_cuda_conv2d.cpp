// cuDNN conv2d against the CPU (im2col + GEMM) kernel: forward, backward-data, backward-filter
// and bias, with stride, padding, dilation and groups. Tolerances (float32, FMA math, no TF32):
// rtol 1e-4 and atol 1e-6 per term of the reduction (C/groups*KH*KW terms per output,
// OC/groups*KH*KW per input gradient, N*OH*OW per weight gradient); float64: rtol 1e-10 and
// atol 1e-13 per term.
#include <gtest/gtest.h>

#include "core/tuning.h"
#include "cuda_test_support.h"
#include "ops/conv2d.h"
#include "ops/conv_settings.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

Conv2dShape shape_with(std::int64_t stride, std::int64_t pad, std::int64_t dilation, std::int64_t groups) {
  Conv2dShape s;
  s.batch = 2, s.in_channels = 4, s.in_height = 9, s.in_width = 8;
  s.out_channels = 6, s.kernel_h = 3, s.kernel_w = 2;
  s.stride_h = stride, s.stride_w = 1, s.pad_h = pad, s.pad_w = pad;
  s.dilation_h = dilation, s.dilation_w = 1, s.groups = groups;
  return s;
}

template <typename T>
void check(const Conv2dShape& s, const std::string& what) {
  const bool single = std::is_same_v<T, float>;
  const double rtol = single ? 1e-4 : 1e-10, per_term = single ? 1e-6 : 1e-13;
  const DType dtype = DTypeOf<T>::value;
  const auto input = random_values<T>(s.input_numel(), 61);
  const auto weight = random_values<T>(s.weight_numel(), 62);
  const auto bias = random_values<T>(s.out_channels, 63);
  const auto grad_output = random_values<T>(s.output_numel(), 64);
  const Context cpu = Context::for_device(Device::cpu());

  std::vector<T> cpu_output(s.output_numel()), cpu_grad_input(s.input_numel()), cpu_grad_weight(s.weight_numel()),
      cpu_grad_bias(s.out_channels);
  conv2d_forward(cpu, s, dtype, input.data(), weight.data(), bias.data(), cpu_output.data());
  conv2d_backward_input(cpu, s, dtype, grad_output.data(), weight.data(), cpu_grad_input.data());
  conv2d_backward_weight(cpu, s, dtype, grad_output.data(), input.data(), cpu_grad_weight.data(),
                         cpu_grad_bias.data());

  DeviceBuffer<T> d_input(input), d_weight(weight), d_bias(bias), d_grad_output(grad_output);
  DeviceBuffer<T> d_output(s.output_numel()), d_grad_input(s.input_numel()), d_grad_weight(s.weight_numel()),
      d_grad_bias(s.out_channels);
  conv2d_forward(gpu_context(), s, dtype, d_input.get(), d_weight.get(), d_bias.get(), d_output.get());
  conv2d_backward_input(gpu_context(), s, dtype, d_grad_output.get(), d_weight.get(), d_grad_input.get());
  conv2d_backward_weight(gpu_context(), s, dtype, d_grad_output.get(), d_input.get(), d_grad_weight.get(),
                         d_grad_bias.get());

  const double window = static_cast<double>(s.kernel_h * s.kernel_w);
  const double pixels = static_cast<double>(s.batch * s.out_height() * s.out_width());
  expect_close(d_output.download(), cpu_output, rtol, per_term * window * (s.in_channels / s.groups), what + " output");
  expect_close(d_grad_input.download(), cpu_grad_input, rtol, per_term * window * (s.out_channels / s.groups),
               what + " grad_input");
  expect_close(d_grad_weight.download(), cpu_grad_weight, rtol, per_term * pixels, what + " grad_weight");
  expect_close(d_grad_bias.download(), cpu_grad_bias, rtol, per_term * pixels, what + " grad_bias");

  // Without bias: the output is the plain convolution, and grad_bias may be omitted.
  conv2d_forward(cpu, s, dtype, input.data(), weight.data(), nullptr, cpu_output.data());
  conv2d_forward(gpu_context(), s, dtype, d_input.get(), d_weight.get(), nullptr, d_output.get());
  expect_close(d_output.download(), cpu_output, rtol, per_term * window * (s.in_channels / s.groups),
               what + " output without bias");
  conv2d_backward_weight(gpu_context(), s, dtype, d_grad_output.get(), d_input.get(), d_grad_weight.get(), nullptr);
  expect_close(d_grad_weight.download(), cpu_grad_weight, rtol, per_term * pixels, what + " grad_weight, no bias");
}

}  // namespace

TEST(CudaConv2d, PlainConvolutionMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("cuDNN conv2d against the CPU");
  check<float>(shape_with(1, 1, 1, 1), "float 3x2 pad 1");
  check<double>(shape_with(1, 1, 1, 1), "double 3x2 pad 1");
}

TEST(CudaConv2d, StrideDilationAndGroupsMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("cuDNN conv2d with stride/dilation/groups");
  check<float>(shape_with(2, 1, 2, 2), "float stride 2, dilation 2, groups 2");
  check<float>(shape_with(1, 0, 1, 2), "float groups 2, no padding");
  check<double>(shape_with(2, 1, 2, 2), "double stride 2, dilation 2, groups 2");
}

// Timed algorithm choice (cudnnFind*Ex, PyTorch's cudnn.benchmark) keeps float32 exactness
// unless TF32 is allowed; with TF32 (PyTorch's default for cuDNN) inputs are rounded to a 10-bit
// mantissa, so the tolerance widens to rtol 1e-2 with atol 1e-3 per term.
TEST(CudaConv2d, BenchmarkedAlgorithmsMatchCpuAndTf32StaysClose) {
  SUBLET_SKIP_WITHOUT_GPU("timed cuDNN algorithm choice");
  const ConvAlgorithmSettings saved = conv_algorithm_settings();
  Conv2dShape s = shape_with(1, 1, 1, 1);
  s.batch = 8, s.in_channels = 16, s.in_height = 16, s.in_width = 16, s.out_channels = 32, s.kernel_w = 3;
  set_conv_algorithm_settings({.benchmark = true, .allow_tf32 = false});
  check<float>(s, "float, timed algorithms");
  check<double>(s, "double, timed algorithms");
  set_conv_algorithm_settings({.benchmark = true, .allow_tf32 = true});
  const auto input = random_values<float>(s.input_numel(), 71);
  const auto weight = random_values<float>(s.weight_numel(), 72);
  std::vector<float> cpu_output(s.output_numel());
  conv2d_forward(Context::for_device(Device::cpu()), s, DType::Float32, input.data(), weight.data(), nullptr,
                 cpu_output.data());
  DeviceBuffer<float> d_input(input), d_weight(weight), d_output(s.output_numel());
  conv2d_forward(gpu_context(), s, DType::Float32, d_input.get(), d_weight.get(), nullptr, d_output.get());
  expect_close(d_output.download(), cpu_output, 1e-2, 1e-3 * 9 * 16, "float, TF32 allowed");
  set_conv_algorithm_settings(saved);
}

// The diagnostic TuningOptions::log_conv_plans (SUBLET_LOG_CONV_PLANS=1): a shape seen for the
// first time logs the engines it considered to stderr when on, and nothing when off (two shapes
// no other test here uses, since the choice is cached per shape).
TEST(CudaConv2d, PlanLogFollowsTheSwitch) {
  SUBLET_SKIP_WITHOUT_GPU("the cuDNN engine log of a new convolution shape");
  for (const bool log : {false, true}) {
    SCOPED_TRACE(log ? "log on" : "log off");
    const ScopedTuning scope([log](TuningOptions& o) { o.log_conv_plans = log; });
    Conv2dShape s = shape_with(1, 1, 1, 1);
    s.batch = 3, s.in_channels = 5, s.in_height = 11 + (log ? 2 : 0), s.in_width = 7, s.out_channels = 7;
    const auto input = random_values<float>(s.input_numel(), 81);
    const auto weight = random_values<float>(s.weight_numel(), 82);
    std::vector<float> cpu_output(s.output_numel());
    conv2d_forward(Context::for_device(Device::cpu()), s, DType::Float32, input.data(), weight.data(), nullptr,
                   cpu_output.data());
    DeviceBuffer<float> d_input(input), d_weight(weight), d_output(s.output_numel());
    ::testing::internal::CaptureStderr();
    conv2d_forward(gpu_context(), s, DType::Float32, d_input.get(), d_weight.get(), nullptr, d_output.get());
    const std::string logged = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(logged.find("conv2d forward") != std::string::npos, log) << "stderr: " << logged;
    expect_close(d_output.download(), cpu_output, 1e-4, 1e-6 * 5 * 3 * 2, "float, logged or not");
  }
}
