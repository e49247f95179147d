#pragma once
// GPU-against-CPU checks for the transformer ops' tests: a function runs on CUDA inputs of one
// dtype (float32, bfloat16, float16) and on the very same values in float64 on the CPU (the
// reference); outputs and the gradients of sum(out * w) (w random) are compared. Error: the
// largest |gpu - cpu| over the largest |cpu| of that tensor (NaN when either side has a NaN, so
// every `<=` check fails on it).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"

namespace sublet::testing {

using ParityFn = std::function<Tensor(const std::vector<Tensor>&)>;

inline double normalized_error(const Tensor& got, const Tensor& reference) {
  const auto g = got.detach().to(Device::cpu()).to(DType::Float64).to_vector<double>();
  const auto r = reference.detach().to(Device::cpu()).to(DType::Float64).to_vector<double>();
  if (g.size() != r.size()) return NAN;
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) || std::isnan(r[i])) return NAN;
    scale = std::fmax(scale, std::fabs(r[i]));
    worst = std::fmax(worst, std::fabs(g[i] - r[i]));
  }
  return worst / std::fmax(scale, 1e-300);
}

// [output error, then one gradient error per floating input].
inline std::vector<double> parity_errors(const ParityFn& fn, const std::vector<Tensor>& inputs, DType dtype,
                                         std::uint64_t seed = 99) {
  std::vector<Tensor> gpu, cpu;
  for (const Tensor& t : inputs) {
    if (t.dtype() == DType::Int64) {
      gpu.push_back(t.to(Device::cuda(0)));
      cpu.push_back(t);
      continue;
    }
    Tensor g = t.detach().to(dtype).to(Device::cuda(0));
    g.requires_grad_(true);
    Tensor c = g.detach().to(Device::cpu()).to(DType::Float64);  // the values the GPU sees
    c.requires_grad_(true);
    gpu.push_back(g);
    cpu.push_back(c);
  }
  const Tensor out_cpu = fn(cpu), out_gpu = fn(gpu);
  Generator generator(seed);
  const Tensor w = randn(out_cpu.sizes(), generator, DType::Float64);
  out_cpu.mul(w).sum().backward();
  out_gpu.mul(w.to(out_gpu.dtype()).to(Device::cuda(0))).sum().backward();
  std::vector<double> errors{normalized_error(out_gpu, out_cpu)};
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::Int64) errors.push_back(normalized_error(gpu[i].grad(), cpu[i].grad()));
  }
  return errors;
}

// Tolerances on normalized_error by dtype: float32 math in float32 vs float64; 16-bit outputs
// rounded once (float16: 11 bits, bfloat16: 8 bits) plus float32 accumulation.
inline double parity_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 2e-5;
    case DType::Float16: return 4e-3;
    default: return 3e-2;
  }
}

inline void expect_parity(const ParityFn& fn, const std::vector<Tensor>& inputs, const char* what) {
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    const std::vector<double> errors = parity_errors(fn, inputs, dtype);
    for (std::size_t i = 0; i < errors.size(); ++i) {
      EXPECT_LE(errors[i], parity_tolerance(dtype))
          << what << " " << dtype_name(dtype) << (i == 0 ? " output" : " gradient of input " + std::to_string(i - 1));
    }
  }
}

}  // namespace sublet::testing
