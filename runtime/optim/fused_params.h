#pragma once
// What the fused optimizer updates (ops/optim_update.h) need from a step's parameters: one
// device and dtype for all of them, dense parameters (contiguous, channels-last or any other
// permutation), and gradients in their parameter's layout (another layout is copied into it;
// the copy is kept alive until the update is enqueued, and a loss-scaled step unscales the copy,
// not the gradient: autograd's gradients already have their leaf's layout). Optimizer::state
// keeps the state tensors in the parameter's layout too.
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
