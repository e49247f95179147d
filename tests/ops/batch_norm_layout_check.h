#pragma once
// One check of the CUDA batch norm (+ residual + ReLU) kernels for an activation type H (float,
// BFloat16, Float16) and a memory format, against the float32 CPU kernel: the inputs are
// rounded to H first and the reference runs in float32 on those same values (NCHW), the
// parameters and statistics are float32 on both sides (the batch-norm dtype rule). Channels-last
// buffers are permuted on the host; every result comes back in NCHW order so that the two
// layouts' results can be compared with each other too (GpuResults).
//
// Tolerances: activations (output, grad_input, grad_residual) as ActivationTolerance<H>
// (layout_test_support.h); float32 statistics (save_mean, save_invstd, running stats) rtol 1e-4,
// atol 1e-4 (the CPU sums each H*W run in float32, the GPU per thread in float32); parameter
// gradients (sums over N*H*W values) rtol 1e-4, atol 1e-5 per summed value.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "layout_test_support.h"
#include "ops/batch_norm.h"
#include "ops/batch_norm_relu.h"

namespace sublet::ops::testing {

struct BatchNormCase {
  BatchNormShape shape;  // its format picks the layout of the GPU run
  bool training = true;
  bool relu = false;  // the fused batch_norm_relu (training only)
  bool residual = false, affine = true, running = true;
  float input_offset = 0.0f;  // added to every input value: a mean far from zero against the spread

  std::string name() const {
    const BatchNormShape& s = shape;
    return std::string(training ? "training" : "eval") + (relu ? " +relu" : "") + (residual ? " +residual" : "") +
           (affine ? "" : " no-affine") + (running ? "" : " no-running-stats") +
           (input_offset != 0.0f ? " offset " + std::to_string(input_offset) : "") + " [" + std::to_string(s.batch) +
           "," + std::to_string(s.channels) + "," + std::to_string(s.height) + "," + std::to_string(s.width) + "] " +
           format_name(s.format);
  }
};

// The GPU's results in NCHW order (activations as float of H, per-channel as float).
struct BatchNormGpuResults {
  std::vector<float> output, save_mean, save_invstd, grad_input, grad_weight, grad_bias, grad_residual;
};

inline constexpr double kStatRtol = 1e-4, kStatAtol = 1e-4, kParamGradRtol = 1e-4, kParamGradAtolPerValue = 1e-5;

template <typename H>
BatchNormGpuResults check_batch_norm(const BatchNormCase& k, std::uint64_t seed = 1) {
  const BatchNormShape& s = k.shape;
  const std::string what = storage_name<H>() + " " + k.name();
  SCOPED_TRACE(what);
  const std::int64_t N = s.batch, C = s.channels, Hh = s.height, W = s.width, count = N * Hh * W;
  BatchNormShape cpu_shape = s;
  cpu_shape.format = MemoryFormat::Contiguous;
  const Context cpu = cpu_context();
  const double momentum = 0.1, eps = 1e-5;

  // Inputs: activations rounded to H, float32 parameters and statistics.
  const auto input = rounded_to<H>(random_values<float>(s.numel(), seed, k.input_offset - 2, k.input_offset + 3));
  const auto residual = rounded_to<H>(random_values<float>(s.numel(), seed + 1, -1.5, 1.5));
  const auto grad_output = rounded_to<H>(random_values<float>(s.numel(), seed + 2));
  const auto weight = random_values<float>(C, seed + 3, 0.5, 1.5), bias = random_values<float>(C, seed + 4, -0.5, 0.5);
  const auto mean0 = random_values<float>(C, seed + 5), var0 = random_values<float>(C, seed + 6, 0.5, 2);
  const float* w = k.affine ? weight.data() : nullptr;
  const float* b = k.affine ? bias.data() : nullptr;

  // ---- forward ----
  std::vector<float> out(s.numel()), save_mean(C), save_invstd(C), rm = mean0, rv = var0;
  if (k.training) {
    batch_norm_forward_training(cpu, cpu_shape, DType::Float32, input.data(), w, b, k.running ? rm.data() : nullptr,
                                k.running ? rv.data() : nullptr, momentum, eps, out.data(), save_mean.data(),
                                save_invstd.data());
  } else {
    batch_norm_forward_eval(cpu, cpu_shape, DType::Float32, input.data(), w, b, mean0.data(), var0.data(), eps,
                            out.data());
  }
  if (k.relu) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (k.residual) out[i] += residual[i];
      out[i] = out[i] > 0.0f ? out[i] : 0.0f;
    }
  }

  auto layout = [&](const std::vector<float>& nchw) { return to_storage<H>(to_layout(nchw, s.format, N, C, Hh, W)); };
  auto back = [&](const std::vector<H>& data) { return from_storage(from_layout(data, s.format, N, C, Hh, W)); };
  const DType dtype = DTypeOf<H>::value;
  DeviceBuffer<H> d_input(layout(input)), d_residual(layout(residual)), d_grad_output(layout(grad_output));
  DeviceBuffer<H> d_out(s.numel());
  DeviceBuffer<float> d_weight(weight), d_bias(bias), d_rm(mean0), d_rv(var0), d_save_mean(C), d_save_invstd(C);
  const float* dw = k.affine ? d_weight.get() : nullptr;
  const float* db = k.affine ? d_bias.get() : nullptr;
  float* drm = k.running || !k.training ? d_rm.get() : nullptr;
  float* drv = k.running || !k.training ? d_rv.get() : nullptr;
  const Context gpu = gpu_context();
  if (k.relu) {
    batch_norm_relu_forward_training(gpu, s, dtype, d_input.get(), k.residual ? d_residual.get() : nullptr, dw, db,
                                     drm, drv, momentum, eps, d_out.get(), d_save_mean.get(), d_save_invstd.get());
  } else if (k.training) {
    batch_norm_forward_training(gpu, s, dtype, d_input.get(), dw, db, drm, drv, momentum, eps, d_out.get(),
                                d_save_mean.get(), d_save_invstd.get());
  } else {
    batch_norm_forward_eval(gpu, s, dtype, d_input.get(), dw, db, d_rm.get(), d_rv.get(), eps, d_out.get());
  }
  const std::vector<H> gpu_out_raw = d_out.download();
  BatchNormGpuResults r;
  r.output = back(gpu_out_raw);
  expect_activation_close(from_layout(gpu_out_raw, s.format, N, C, Hh, W), out, "output");
  if (k.training) {
    r.save_mean = d_save_mean.download();
    r.save_invstd = d_save_invstd.download();
    expect_close(r.save_mean, save_mean, kStatRtol, kStatAtol, "save_mean");
    expect_close(r.save_invstd, save_invstd, kStatRtol, kStatAtol, "save_invstd");
    if (k.running) {
      expect_close(d_rm.download(), rm, kStatRtol, kStatAtol, "running_mean");
      expect_close(d_rv.download(), rv, kStatRtol, kStatAtol, "running_var (unbiased)");
    }
  } else {
    expect_close(d_rm.download(), mean0, 0, 0, "running_mean (eval leaves it)");
    expect_close(d_rv.download(), var0, 0, 0, "running_var (eval leaves it)");
  }

  // ---- backward ----
  // The ReLU's mask comes from the GPU's own output (a value within rounding of 0 may be
  // positive on one side only; the backward is checked for the forward that ran).
  std::vector<float> g = grad_output;
  if (k.relu) {
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = r.output[i] > 0.0f ? grad_output[i] : 0.0f;
  }
  std::vector<float> gi(s.numel()), gw(C), gb(C);
  if (k.training) {
    batch_norm_backward_training(cpu, cpu_shape, DType::Float32, g.data(), input.data(), w, save_mean.data(),
                                 save_invstd.data(), gi.data(), gw.data(), gb.data());
  } else {
    batch_norm_backward_eval(cpu, cpu_shape, DType::Float32, g.data(), input.data(), w, mean0.data(), var0.data(),
                             eps, gi.data(), gw.data(), gb.data());
  }
  DeviceBuffer<H> d_gi(s.numel()), d_gres(s.numel());
  DeviceBuffer<float> d_gw(C), d_gb(C);
  auto run_backward = [&](H* grad_input, float* grad_weight, float* grad_bias, H* grad_residual) {
    if (k.relu) {
      batch_norm_relu_backward_training(gpu, s, dtype, d_grad_output.get(), d_out.get(), d_input.get(), dw,
                                        d_save_mean.get(), d_save_invstd.get(), grad_input, grad_weight, grad_bias,
                                        grad_residual);
    } else if (k.training) {
      batch_norm_backward_training(gpu, s, dtype, d_grad_output.get(), d_input.get(), dw, d_save_mean.get(),
                                   d_save_invstd.get(), grad_input, grad_weight, grad_bias);
    } else {
      batch_norm_backward_eval(gpu, s, dtype, d_grad_output.get(), d_input.get(), dw, d_rm.get(), d_rv.get(), eps,
                               grad_input, grad_weight, grad_bias);
    }
  };
  run_backward(d_gi.get(), d_gw.get(), d_gb.get(), k.relu ? d_gres.get() : nullptr);
  const double sum_atol = kParamGradAtolPerValue * static_cast<double>(count);
  r.grad_input = back(d_gi.download());
  r.grad_weight = d_gw.download();
  r.grad_bias = d_gb.download();
  expect_activation_close(from_layout(d_gi.download(), s.format, N, C, Hh, W), gi, "grad_input");
  expect_close(r.grad_weight, gw, kParamGradRtol, sum_atol, "grad_weight");
  expect_close(r.grad_bias, gb, kParamGradRtol, sum_atol, "grad_bias");
  if (k.relu) {
    r.grad_residual = back(d_gres.download());
    expect_close(r.grad_residual, g, 0, 0, "grad_residual (grad_output where output > 0)");
  }
  // Each gradient alone (a frozen layer wants grad_input only; a first layer no grad_input):
  // the kernels skip work for the missing ones and must give the same values, bit for bit from
  // the split kernels (ops/cuda/batch_norm_split.cu: fixed orders); float32 NCHW is cuDNN's (or
  // the fused one-block kernels) and is held to the reference's tolerance instead.
  const bool own_kernels = kIsSixteenBit<H> || s.format == MemoryFormat::ChannelsLast;
  DeviceBuffer<H> d_gi_alone(s.numel());
  run_backward(d_gi_alone.get(), nullptr, nullptr, nullptr);
  DeviceBuffer<float> d_gw_alone(C);
  run_backward(nullptr, d_gw_alone.get(), nullptr, nullptr);
  if (own_kernels) {
    expect_bits_equal(d_gi_alone.download(), d_gi.download(), "grad_input alone against with the others");
    expect_close(d_gw_alone.download(), r.grad_weight, 0, 0, "grad_weight alone against with the others");
  } else {
    expect_activation_close(from_layout(d_gi_alone.download(), s.format, N, C, Hh, W), gi, "grad_input alone");
    expect_close(d_gw_alone.download(), gw, kParamGradRtol, sum_atol, "grad_weight alone");
  }
  return r;
}

}  // namespace sublet::ops::testing
