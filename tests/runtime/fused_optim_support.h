#pragma once
// Shared by the fused-optimizer tests: twin parameter sets (same values) driven by two
// optimizers through the same random gradients, and the largest relative difference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/factories.h"
#include "runtime/optim/optimizer.h"
#include "runtime/tensor.h"
#include "tests/nan_safe_max.h"

namespace sublet::testing {

// Shapes of a small convnet's parameters, including a 1-element and an odd-sized one, and one
// larger than the CUDA kernel's 8192-element chunk (ops/cuda/optim_update.cu) so that a tensor spans
// several blocks, the last of them partly filled.
inline std::vector<Shape> fused_test_shapes() {
  return {{16, 3, 3, 3}, {16}, {16}, {1}, {40001}, {10, 37}, {10}};
}

inline std::vector<Tensor> make_params(const std::vector<Shape>& shapes, DType dtype, Device device,
                                       std::uint64_t seed) {
  Generator g(seed);
  std::vector<Tensor> out;
  for (const Shape& s : shapes) {
    Tensor host = randn(s, g, TensorOptions().dtype(dtype));
    Tensor p = host.to(device);
    p.requires_grad_(true);
    out.push_back(p);
  }
  return out;
}

// Gives every parameter but `skip` (-1: none) a seeded random gradient on its device.
inline void set_random_grads(std::vector<Tensor>& params, std::uint64_t seed, std::int64_t skip = -1) {
  Generator g(seed);
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor grad = randn(params[i].sizes(), g, TensorOptions().dtype(params[i].dtype()));
    if (static_cast<std::int64_t>(i) == skip) {
      params[i].set_grad(Tensor());
      continue;
    }
    params[i].set_grad(grad.to(params[i].device()));
  }
}

// max |a - b| / max(1, |b|) over all elements of all tensors (read back to the host in float64).
inline double max_relative_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].to(Device::cpu()).to(DType::Float64).to_vector<double>();
    const auto y = b[i].to(Device::cpu()).to(DType::Float64).to_vector<double>();
    for (std::size_t k = 0; k < x.size(); ++k)
      worst = nan_safe_max(worst, std::abs(x[k] - y[k]) / std::max(1.0, std::abs(y[k])));
  }
  return worst;
}

}  // namespace sublet::testing
