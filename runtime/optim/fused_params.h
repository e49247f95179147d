#pragma once
// What the fused optimizer updates (ops/optim_update.h) need from a step's parameters: one
// device and dtype for all of them, contiguous parameters, and contiguous gradients (a
// non-contiguous gradient is copied; the copy is kept alive until the update is enqueued, and a
// loss-scaled step unscales the copy, not the gradient: autograd's gradients are contiguous).
#include <cstddef>
#include <vector>

#include "ops/context.h"
#include "runtime/tensor.h"

namespace sublet::optim::detail {

struct FusedParams {
  bool usable = false;          // false: fall back to the per-parameter Tensor ops
  DType dtype = DType::Float32;
  ops::Context ctx;
  std::vector<Tensor> grads;    // contiguous, aligned with the step's indices
};

// Whether fused_params() would be usable for these parameters (no copies made).
bool fused_supported(const std::vector<Tensor>& params, const std::vector<std::size_t>& indices);
FusedParams fused_params(const std::vector<Tensor>& params, const std::vector<std::size_t>& indices);

}  // namespace sublet::optim::detail
