#pragma once
// What the convolution + batch norm fusion's tests compare on either device: a ResNet block (or
// model) run with SUBLET_CONV_BN_FUSION set one way against the same block run the other way
// (the separate batch norm kernels), from the same weights and input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/tuning.h"
#include "runtime/nn/module.h"
#include "runtime/tensor.h"

namespace sublet::testing {

// Largest |a - b| / max(floor, |b|) over two tensors' values.
inline double worst_relative(const Tensor& a, const Tensor& b, double floor) {
  const auto va = a.to(Device::cpu()).to(DType::Float32).contiguous().to_vector<float>();
  const auto vb = b.to(Device::cpu()).to(DType::Float32).contiguous().to_vector<float>();
  EXPECT_EQ(va.size(), vb.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(va.size(), vb.size()); ++i) {
    const double d = std::abs(static_cast<double>(va[i]) - vb[i]) / std::max(floor, std::abs(static_cast<double>(vb[i])));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

struct BlockRun {
  Tensor output;
  std::vector<Tensor> grads;    // of the parameters, in order
  std::vector<Tensor> buffers;  // running statistics and batch counts after the step
};

// One forward and backward of `block` on `input` (gradient: `upstream`) with the switch at `mode`.
inline BlockRun run_block(nn::Module& block, const Tensor& input, const Tensor& upstream, ConvBnFusion mode) {
  ScopedTuning scope([mode](TuningOptions& o) { o.conv_bn_fusion = mode; });
  for (Tensor& p : block.parameters()) p.set_grad(Tensor());
  BlockRun run;
  run.output = block.forward(input);
  (run.output * upstream).sum().backward();
  for (const Tensor& p : block.parameters()) run.grads.push_back(p.grad().clone());
  for (const Tensor& b : block.buffers()) run.buffers.push_back(b.clone());
  return run;
}

}  // namespace sublet::testing
