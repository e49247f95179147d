#pragma once
// CUDA layer normalisation (ops/layer_norm.h), float32, float64 and 16-bit inputs (with weight and
// bias of the input's dtype); statistics in float32 (float64 for float64). Rows up to 32 elements
// per lane of a warp (1,024 float32 or 16-bit columns with 16-byte packs, 512 float64, 256
// without packs) take one warp per row, wider rows one block per row. Backward: the input gradient and per-block partial
// column sums of the weight/bias gradients in one pass, then one pass over the partials in a
// fixed order (deterministic).
#include "ops/layer_norm.h"

namespace sublet::ops::cuda {

void layer_norm_forward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd);
void layer_norm_backward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias);

// The general forms (ops/layer_norm.h's LayerNormForwardArgs / LayerNormBackwardArgs).
void layer_norm_fused_forward(const Context& ctx, const LayerNormForwardArgs& args);
void layer_norm_fused_backward(const Context& ctx, const LayerNormBackwardArgs& args);

}  // namespace sublet::ops::cuda
