#pragma once
// Layer normalisation over the last `cols` elements of each of `rows` rows (row-major), as
// torch.nn.functional.layer_norm: y = (x - mean) * rstd * weight + bias with the biased variance,
// rstd = 1 / sqrt(var + eps). weight and bias ([cols], the input's dtype) may each be null.
// The forward saves mean and rstd per row in accumulate_dtype(dtype) (ops/accumulate_dtype.h):
// float32 for float32 and 16-bit inputs, float64 for float64; backward reuses them.
#include <cstdint>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

struct LayerNormShape {
  std::int64_t rows = 0, cols = 0;

  void validate(const char* op) const;  // throws ShapeError naming op and the sizes
};

void layer_norm_forward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd);
// Each of grad_input, grad_weight, grad_bias may be null (not wanted); those given are overwritten.
// grad_weight needs weight (and its rows' sum of grad_output * xhat); grad_input uses weight when given.
void layer_norm_backward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias);

}  // namespace sublet::ops
