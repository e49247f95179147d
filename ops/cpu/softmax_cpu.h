#pragma once
// CPU softmax over rows (ops/softmax.h), float32 and float64; row sums in double.
#include "ops/softmax.h"

namespace sublet::ops::cpu {

template <typename T>
void softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* input, void* output);
template <typename T>
void softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_output,
                      const void* output, void* grad_input);

}  // namespace sublet::ops::cpu
