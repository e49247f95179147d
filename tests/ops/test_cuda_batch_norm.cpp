// cuDNN batch norm (and the own eval-backward kernel) against the CPU kernel: outputs,
// save_mean/save_invstd, the running statistics (unbiased variance) and all gradients, with and
// without the affine transform and running buffers. Tolerances: float32 rtol 1e-4, atol 1e-5
// (cuDNN accumulates the statistics in float, the CPU in double); float64 rtol 1e-10, atol 1e-12.
#include <gtest/gtest.h>

#include "cuda_test_support.h"
#include "ops/batch_norm.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename T>
void check_training(bool affine, bool running_mean_given, bool running_var_given, const std::string& what) {
  using Tol = BatchNormTolerance<T>;
  const BatchNormShape s{4, 3, 5, 6};
  const DType dtype = DTypeOf<T>::value;
  const auto input = random_values<T>(s.numel(), 81, -2, 3);
  const auto weight = random_values<T>(s.channels, 82, 0.5, 1.5), bias = random_values<T>(s.channels, 83);
  const auto mean0 = random_values<T>(s.channels, 84), var0 = random_values<T>(s.channels, 85, 0.5, 2);
  const auto grad_output = random_values<T>(s.numel(), 86);
  const Context cpu = Context::for_device(Device::cpu());
  const double momentum = 0.1, eps = 1e-5;

  std::vector<T> out(s.numel()), save_mean(s.channels), save_invstd(s.channels), rm = mean0, rv = var0;
  batch_norm_forward_training(cpu, s, dtype, input.data(), affine ? weight.data() : nullptr,
                              affine ? bias.data() : nullptr, running_mean_given ? rm.data() : nullptr,
                              running_var_given ? rv.data() : nullptr, momentum, eps, out.data(), save_mean.data(),
                              save_invstd.data());
  std::vector<T> gi(s.numel()), gw(s.channels), gb(s.channels);
  batch_norm_backward_training(cpu, s, dtype, grad_output.data(), input.data(), affine ? weight.data() : nullptr,
                               save_mean.data(), save_invstd.data(), gi.data(), gw.data(), gb.data());

  DeviceBuffer<T> d_input(input), d_weight(weight), d_bias(bias), d_rm(mean0), d_rv(var0), d_grad_output(grad_output);
  DeviceBuffer<T> d_out(s.numel()), d_save_mean(s.channels), d_save_invstd(s.channels);
  batch_norm_forward_training(gpu_context(), s, dtype, d_input.get(), affine ? d_weight.get() : nullptr,
                              affine ? d_bias.get() : nullptr, running_mean_given ? d_rm.get() : nullptr,
                              running_var_given ? d_rv.get() : nullptr, momentum, eps, d_out.get(),
                              d_save_mean.get(), d_save_invstd.get());
  expect_close(d_out.download(), out, Tol::rtol, Tol::atol, what + " output");
  expect_close(d_save_mean.download(), save_mean, Tol::rtol, Tol::atol, what + " save_mean");
  expect_close(d_save_invstd.download(), save_invstd, Tol::rtol, Tol::atol, what + " save_invstd");
  expect_close(d_rm.download(), rm, Tol::rtol, Tol::atol, what + " running_mean");
  expect_close(d_rv.download(), rv, Tol::rtol, Tol::atol, what + " running_var (unbiased)");

  DeviceBuffer<T> d_gi(s.numel()), d_gw(s.channels), d_gb(s.channels);
  batch_norm_backward_training(gpu_context(), s, dtype, d_grad_output.get(), d_input.get(),
                               affine ? d_weight.get() : nullptr, d_save_mean.get(), d_save_invstd.get(), d_gi.get(),
                               d_gw.get(), d_gb.get());
  expect_close(d_gi.download(), gi, Tol::rtol, Tol::atol, what + " grad_input");
  expect_close(d_gw.download(), gw, Tol::rtol, Tol::atol * s.batch * s.spatial(), what + " grad_weight");
  expect_close(d_gb.download(), gb, Tol::rtol, Tol::atol * s.batch * s.spatial(), what + " grad_bias");

  // Only grad_input wanted (a frozen layer): the others may be nullptr.
  DeviceBuffer<T> d_gi_only(s.numel());
  batch_norm_backward_training(gpu_context(), s, dtype, d_grad_output.get(), d_input.get(),
                               affine ? d_weight.get() : nullptr, d_save_mean.get(), d_save_invstd.get(),
                               d_gi_only.get(), nullptr, nullptr);
  expect_close(d_gi_only.download(), gi, Tol::rtol, Tol::atol, what + " grad_input alone");
}

template <typename T>
void check_eval(bool affine, const std::string& what) {
  using Tol = BatchNormTolerance<T>;
  const BatchNormShape s{3, 4, 2, 7};
  const DType dtype = DTypeOf<T>::value;
  const auto input = random_values<T>(s.numel(), 91, -2, 3);
  const auto weight = random_values<T>(s.channels, 92, 0.5, 1.5), bias = random_values<T>(s.channels, 93);
  const auto rm = random_values<T>(s.channels, 94), rv = random_values<T>(s.channels, 95, 0.5, 2);
  const auto grad_output = random_values<T>(s.numel(), 96);
  const Context cpu = Context::for_device(Device::cpu());
  const double eps = 1e-3;
  const T* w = affine ? weight.data() : nullptr;

  std::vector<T> out(s.numel()), gi(s.numel()), gw(s.channels), gb(s.channels);
  batch_norm_forward_eval(cpu, s, dtype, input.data(), w, affine ? bias.data() : nullptr, rm.data(), rv.data(), eps,
                          out.data());
  batch_norm_backward_eval(cpu, s, dtype, grad_output.data(), input.data(), w, rm.data(), rv.data(), eps, gi.data(),
                           gw.data(), gb.data());

  DeviceBuffer<T> d_input(input), d_weight(weight), d_bias(bias), d_rm(rm), d_rv(rv), d_grad_output(grad_output);
  DeviceBuffer<T> d_out(s.numel()), d_gi(s.numel()), d_gw(s.channels), d_gb(s.channels);
  T* dw = affine ? d_weight.get() : nullptr;
  batch_norm_forward_eval(gpu_context(), s, dtype, d_input.get(), dw, affine ? d_bias.get() : nullptr, d_rm.get(),
                          d_rv.get(), eps, d_out.get());
  batch_norm_backward_eval(gpu_context(), s, dtype, d_grad_output.get(), d_input.get(), dw, d_rm.get(), d_rv.get(),
                           eps, d_gi.get(), d_gw.get(), d_gb.get());
  expect_close(d_out.download(), out, Tol::rtol, Tol::atol, what + " eval output");
  expect_close(d_gi.download(), gi, Tol::rtol, Tol::atol, what + " eval grad_input");
  expect_close(d_gw.download(), gw, Tol::rtol, Tol::atol * s.batch * s.spatial(), what + " eval grad_weight");
  expect_close(d_gb.download(), gb, Tol::rtol, Tol::atol * s.batch * s.spatial(), what + " eval grad_bias");
}

}  // namespace

TEST(CudaBatchNorm, TrainingMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("cuDNN batch norm training against the CPU");
  check_training<float>(true, true, true, "float affine");
  check_training<double>(true, true, true, "double affine");
}

TEST(CudaBatchNorm, TrainingWithoutAffineOrWithOneRunningBufferMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm with missing optional buffers");
  check_training<float>(false, false, false, "float, no affine, no running stats");
  check_training<float>(true, true, false, "float, running_mean only");
  check_training<float>(false, false, true, "float, running_var only");
}

TEST(CudaBatchNorm, EvalForwardAndBackwardMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm inference and its backward");
  check_eval<float>(true, "float affine");
  check_eval<float>(false, "float plain");
  check_eval<double>(true, "double affine");
}

TEST(CudaBatchNorm, TwoDimensionalInputIsOneByOneSpatial) {
  SUBLET_SKIP_WITHOUT_GPU("batch norm on [N, C] inputs");
  const BatchNormShape s{16, 5, 1, 1};
  const auto input = random_values<float>(s.numel(), 97);
  std::vector<float> out(s.numel()), mean(5), invstd(5);
  batch_norm_forward_training(Context::for_device(Device::cpu()), s, DType::Float32, input.data(), nullptr, nullptr,
                              nullptr, nullptr, 0.1, 1e-5, out.data(), mean.data(), invstd.data());
  DeviceBuffer<float> d_input(input), d_out(s.numel()), d_mean(5), d_invstd(5);
  batch_norm_forward_training(gpu_context(), s, DType::Float32, d_input.get(), nullptr, nullptr, nullptr, nullptr,
                              0.1, 1e-5, d_out.get(), d_mean.get(), d_invstd.get());
  expect_close(d_out.download(), out, 1e-4, 1e-5, "[N, C] output");
  expect_close(d_invstd.download(), invstd, 1e-4, 1e-5, "[N, C] save_invstd");
}
