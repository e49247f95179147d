#pragma once
// CPU GELU (ops/gelu.h), float32 and float64.
#include "ops/gelu.h"

namespace sublet::ops::cpu {

template <typename T>
void gelu_forward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate, const void* input,
                  void* output);
template <typename T>
void gelu_backward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                   const void* grad_output, const void* input, void* grad_input);

}  // namespace sublet::ops::cpu
