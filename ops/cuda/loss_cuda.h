#pragma once
// CUDA nll_loss behind ops/loss.h (same arguments, device pointers; shapes already validated).
// Targets are checked on the host before any kernel runs (one small copy back per call), so an
// out-of-range target throws the CPU kernel's ValueError instead of reading out of bounds.
#include "ops/loss.h"

namespace sublet::ops::cuda {

void nll_loss_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* log_probs,
                      const std::int64_t* targets, void* loss);
void nll_loss_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_loss,
                       const std::int64_t* targets, void* grad_log_probs);

}  // namespace sublet::ops::cuda
