#pragma once
// CUDA layer normalisation (ops/layer_norm.h), float32, float64 and 16-bit inputs (with weight and
// bias of the input's dtype); statistics in float32 (float64 for float64). Forward and the input
// gradient: one block per row. Weight and bias gradients: per-tile partial column sums in a
// workspace, then one pass over the tiles in a fixed order (deterministic).
#include "ops/layer_norm.h"

namespace sublet::ops::cuda {

void layer_norm_forward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd);
void layer_norm_backward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias);

}  // namespace sublet::ops::cuda
