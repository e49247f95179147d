#pragma once
// CPU layer normalisation (ops/layer_norm.h), float32 and float64; statistics in double, saved
// as T (float32 or float64: accumulate_dtype of both).
#include "ops/layer_norm.h"

namespace sublet::ops::cpu {

template <typename T>
void layer_norm_forward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd);
template <typename T>
void layer_norm_backward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias);

}  // namespace sublet::ops::cpu
