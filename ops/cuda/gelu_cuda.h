#pragma once
// CUDA GELU (ops/gelu.h), float32, float64 and 16-bit (computed in float32); the formulas are
// ops/gelu_math.h's, shared with the CPU.
#include "ops/gelu.h"

namespace sublet::ops::cuda {

void gelu_forward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate, const void* input,
                  void* output);
void gelu_backward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                   const void* grad_output, const void* input, void* grad_input);

}  // namespace sublet::ops::cuda
