// The fused batch norm + residual + ReLU kernels (ops/batch_norm_relu.h) against the CPU
// composition: CPU batch norm, then + residual, then ReLU forward; ReLU's gradient (grad where the
// output > 0), then CPU batch norm backward. Outputs, save_mean/save_invstd, running statistics
// and all four gradients, with and without residual, affine transform and running buffers, at a
// small odd shape, at ResNet-18's layer sizes and at channel sizes that fill each register count
// (1, 2 or 4 values per thread) wholly or in part. Tolerances as test_cuda_batch_norm: float32 rtol 1e-4, atol 1e-5 (the fused
// kernel accumulates in double, cuDNN's and the CPU's orders differ); float64 rtol 1e-10, atol 1e-12;
// per-channel sums get atol times the channel's value count.
#include <gtest/gtest.h>

#include <string>

#include "cuda_test_support.h"
#include "core/errors.h"
#include "ops/batch_norm.h"
#include "ops/batch_norm_relu.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

struct Variant {
  bool residual = true, affine = true, running = true;
  std::string name() const {
    return std::string(residual ? "residual" : "no residual") + (affine ? ", affine" : ", plain") +
           (running ? ", running stats" : ", no running stats");
  }
};

template <typename T>
void check_against_cpu(const BatchNormShape& s, const Variant& v) {
  using Tol = BatchNormTolerance<T>;
  const std::string what = std::string(std::is_same_v<T, float> ? "float " : "double ") + v.name() + " [" +
                           std::to_string(s.batch) + "," + std::to_string(s.channels) + "," +
                           std::to_string(s.height) + "," + std::to_string(s.width) + "]";
  const DType dtype = DTypeOf<T>::value;
  const auto input = random_values<T>(s.numel(), 11, -2, 3);
  const auto residual = random_values<T>(s.numel(), 12, -1.5, 1.5);
  const auto weight = random_values<T>(s.channels, 13, 0.5, 1.5), bias = random_values<T>(s.channels, 14, -0.5, 0.5);
  const auto mean0 = random_values<T>(s.channels, 15), var0 = random_values<T>(s.channels, 16, 0.5, 2);
  const auto grad_output = random_values<T>(s.numel(), 17);
  const Context cpu = Context::for_device(Device::cpu());
  const double momentum = 0.1, eps = 1e-5;
  const T* w = v.affine ? weight.data() : nullptr;

  // The CPU composition.
  std::vector<T> out(s.numel()), save_mean(s.channels), save_invstd(s.channels), rm = mean0, rv = var0;
  batch_norm_forward_training(cpu, s, dtype, input.data(), w, v.affine ? bias.data() : nullptr,
                              v.running ? rm.data() : nullptr, v.running ? rv.data() : nullptr, momentum, eps,
                              out.data(), save_mean.data(), save_invstd.data());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (v.residual) out[i] += residual[i];
    out[i] = out[i] > T(0) ? out[i] : T(0);
  }

  // The fused kernels.
  DeviceBuffer<T> d_input(input), d_residual(residual), d_weight(weight), d_bias(bias), d_rm(mean0), d_rv(var0);
  DeviceBuffer<T> d_grad_output(grad_output), d_out(s.numel()), d_save_mean(s.channels), d_save_invstd(s.channels);
  T* dw = v.affine ? d_weight.get() : nullptr;
  batch_norm_relu_forward_training(gpu_context(), s, dtype, d_input.get(), v.residual ? d_residual.get() : nullptr, dw,
                                   v.affine ? d_bias.get() : nullptr, v.running ? d_rm.get() : nullptr,
                                   v.running ? d_rv.get() : nullptr, momentum, eps, d_out.get(), d_save_mean.get(),
                                   d_save_invstd.get());
  expect_close(d_out.download(), out, Tol::rtol, Tol::atol, what + " output");
  expect_close(d_save_mean.download(), save_mean, Tol::rtol, Tol::atol, what + " save_mean");
  expect_close(d_save_invstd.download(), save_invstd, Tol::rtol, Tol::atol, what + " save_invstd");
  if (v.running) {
    expect_close(d_rm.download(), rm, Tol::rtol, Tol::atol, what + " running_mean");
    expect_close(d_rv.download(), rv, Tol::rtol, Tol::atol, what + " running_var (unbiased)");
  }

  // The CPU backward takes its ReLU mask from the GPU's output: a value within rounding of 0 may
  // be positive on one side only, and the backward is checked for the forward that ran.
  const std::vector<T> gpu_out = d_out.download();
  std::vector<T> relu_grad(s.numel());
  for (std::size_t i = 0; i < gpu_out.size(); ++i) relu_grad[i] = gpu_out[i] > T(0) ? grad_output[i] : T(0);
  std::vector<T> gi(s.numel()), gw(s.channels), gb(s.channels);
  batch_norm_backward_training(cpu, s, dtype, relu_grad.data(), input.data(), w, save_mean.data(), save_invstd.data(),
                               gi.data(), gw.data(), gb.data());

  DeviceBuffer<T> d_gi(s.numel()), d_gw(s.channels), d_gb(s.channels), d_gr(s.numel());
  batch_norm_relu_backward_training(gpu_context(), s, dtype, d_grad_output.get(), d_out.get(), d_input.get(), dw,
                                    d_save_mean.get(), d_save_invstd.get(), d_gi.get(), d_gw.get(), d_gb.get(),
                                    v.residual ? d_gr.get() : nullptr);
  const double per_channel = static_cast<double>(s.batch * s.spatial());
  expect_close(d_gi.download(), gi, Tol::rtol, Tol::atol, what + " grad_input");
  expect_close(d_gw.download(), gw, Tol::rtol, Tol::atol * per_channel, what + " grad_weight");
  expect_close(d_gb.download(), gb, Tol::rtol, Tol::atol * per_channel, what + " grad_bias");
  if (v.residual) expect_equal(d_gr.download(), relu_grad, what + " grad_residual");

  // Only the parameters' gradients wanted (a frozen input): grad_input and grad_residual nullptr.
  DeviceBuffer<T> d_gw_only(s.channels);
  batch_norm_relu_backward_training(gpu_context(), s, dtype, d_grad_output.get(), d_out.get(), d_input.get(), dw,
                                    d_save_mean.get(), d_save_invstd.get(), nullptr, d_gw_only.get(), nullptr,
                                    nullptr);
  expect_close(d_gw_only.download(), gw, Tol::rtol, Tol::atol * per_channel, what + " grad_weight alone");
}

}  // namespace

TEST(CudaBatchNormRelu, MatchesTheCpuCompositionInEveryVariant) {
  SUBLET_SKIP_WITHOUT_GPU("fused batch norm + ReLU against the CPU");
  const BatchNormShape odd{4, 3, 5, 7};
  for (const Variant& v : {Variant{true, true, true}, Variant{false, true, true}, Variant{true, false, false},
                           Variant{false, false, true}}) {
    check_against_cpu<float>(odd, v);
    check_against_cpu<double>(odd, v);
  }
}

TEST(CudaBatchNormRelu, MatchesTheCpuAtResNet18Sizes) {
  SUBLET_SKIP_WITHOUT_GPU("fused batch norm + ReLU at ResNet-18 sizes");
  check_against_cpu<float>({128, 128, 4, 4}, Variant{});            // layer2, batch 128: 2048 per channel
  check_against_cpu<float>({128, 512, 1, 1}, Variant{false, true, true});  // layer4: 128 per channel
  check_against_cpu<float>({512, 256, 2, 2}, Variant{});            // batch 512, layer3: 2048
  check_against_cpu<float>({25, 3, 9, 9}, Variant{});               // 2025: the last register slots partly used
  check_against_cpu<double>({33, 2, 5, 5}, Variant{});              // 825: two values per thread, partly used
}

TEST(CudaBatchNormRelu, SaysWhereItAppliesAndRefusesElsewhere) {
  const BatchNormShape small{2, 3, 4, 4}, large{128, 64, 8, 8};  // 32 and 8192 values per channel
  const Context cpu = Context::for_device(Device::cpu());
  // The CPU has fused float32/float64 NCHW kernels of any size (ops/cpu/batch_norm_relu_cpu.cpp),
  // no 16-bit ones.
  EXPECT_TRUE(batch_norm_relu_fused(cpu, small, DType::Float32));
  EXPECT_TRUE(batch_norm_relu_fused(cpu, large, DType::Float32));
  EXPECT_FALSE(batch_norm_relu_fused(cpu, small, DType::BFloat16));
  std::vector<float> x(small.numel()), out(small.numel()), mean(3), invstd(3);
  try {
    batch_norm_relu_forward_training(cpu, small, DType::BFloat16, x.data(), nullptr, nullptr, nullptr, nullptr,
                                     nullptr, 0.1, 1e-5, out.data(), mean.data(), invstd.data());
    FAIL() << "the fused kernels ran in bfloat16 on the CPU";
  } catch (const ValueError& e) {
    // Where the fused kernels exist comes from the kernel table.
    EXPECT_NE(std::string(e.what()).find("the fused kernels need a device and dtype that have them"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("got cpu, bfloat16"), std::string::npos) << e.what();
  }
  SUBLET_SKIP_WITHOUT_GPU("which GPU shapes the fused kernels take");
  EXPECT_TRUE(batch_norm_relu_fused(gpu_context(), small, DType::Float32));
  EXPECT_TRUE(batch_norm_relu_fused(gpu_context(), small, DType::Float64));
  EXPECT_FALSE(batch_norm_relu_fused(gpu_context(), large, DType::Float32));
  EXPECT_FALSE(batch_norm_relu_fused(gpu_context(), small, DType::Int64));
}
