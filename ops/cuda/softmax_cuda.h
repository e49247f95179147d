#pragma once
// CUDA softmax and log_softmax over rows (ops/softmax.h, ops/loss.h), float32, float64 and the
// 16-bit types: one block per row, row statistics in double for float32/float64 and in float32
// for 16-bit rows, combined in a fixed order (deterministic).
#include "ops/loss.h"

namespace sublet::ops::cuda {

void softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* input, void* output);
void softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_output,
                      const void* output, void* grad_input);
void log_softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* input,
                         void* output);
void log_softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_output,
                          const void* output, void* grad_input);

}  // namespace sublet::ops::cuda
