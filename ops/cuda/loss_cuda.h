#pragma once
// CUDA losses behind ops/loss.h (same arguments, device pointers; shapes already validated).
// Targets are checked on the host before any kernel runs (one small copy back per call), so an
// out-of-range target throws the CPU kernel's ValueError instead of reading out of bounds.
#include "ops/loss.h"

namespace sublet::ops::cuda {

void log_softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* input,
                         void* output);
void log_softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_output,
                          const void* output, void* grad_input);
void nll_loss_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* log_probs,
                      const std::int64_t* targets, void* loss);
void nll_loss_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_loss,
                       const std::int64_t* targets, void* grad_log_probs);
void cross_entropy_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* logits,
                           const std::int64_t* targets, double label_smoothing, void* loss);
void cross_entropy_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_loss,
                            const void* logits, const std::int64_t* targets, double label_smoothing,
                            void* grad_logits);

}  // namespace sublet::ops::cuda
