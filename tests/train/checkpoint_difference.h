#pragma once
// How far apart two training checkpoints' models are: max |a - b| over every float32 tensor,
// relative to the largest |b| of the model (NaN-safe: a NaN anywhere makes it NaN or infinite).
// Relative to the model, not to each tensor: batch norm's biases start at zero and their
// gradients are sums of many signed terms, so their own scale after a few steps is
// rounding-sized and a per-tensor ratio would measure float32 cancellation.
#include <cmath>
#include <filesystem>
#include <string>

#include "train/checkpoint.h"

namespace sublet::testing {

struct CheckpointDifference {
  double relative = 0;  // INFINITY when the models do not match tensor for tensor
  double largest = 0;
  std::string where;    // the tensor of the largest difference
};

inline CheckpointDifference checkpoint_difference(const std::filesystem::path& a, const std::filesystem::path& b) {
  const auto x = train::load_checkpoint(a).model_state;
  const auto y = train::load_checkpoint(b).model_state;
  CheckpointDifference d;
  if (x.size() != y.size()) return {INFINITY, INFINITY, "(different models)"};
  double scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].first != y[i].first) return {INFINITY, INFINITY, x[i].first + " / " + y[i].first};
    if (x[i].second.dtype() != DType::Float32) continue;  // num_batches_tracked counts steps
    const auto u = x[i].second.to_vector<double>();
    const auto v = y[i].second.to_vector<double>();
    if (u.size() != v.size()) return {INFINITY, INFINITY, x[i].first};
    for (std::size_t k = 0; k < v.size(); ++k) {
      scale = std::fmax(scale, std::fabs(v[k]));
      const double e = std::fabs(u[k] - v[k]);
      if (!(e <= d.largest)) {
        d.largest = e;
        d.where = x[i].first;
      }
    }
  }
  d.relative = d.largest / (scale > 0 ? scale : 1.0);
  return d;
}

}  // namespace sublet::testing
