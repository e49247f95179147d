#include "ops/layer_norm.h"

#include <string>

#include "core/errors.h"
#include "ops/layer_norm_kernels.h"

namespace sublet::ops {

void LayerNormShape::validate(const char* op) const {
  if (rows < 0 || cols < 1) {
    throw ShapeError(std::string(op) + ": expected rows >= 0 and a non-empty normalized shape, got " +
                     std::to_string(rows) + " rows of " + std::to_string(cols) + " elements");
  }
}

void layer_norm_forward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd) {
  shape.validate("layer_norm");
  if (!(eps >= 0)) throw ValueError("layer_norm: eps must be >= 0, got " + std::to_string(eps));
  layer_norm_forward_kernels().get("layer_norm", ctx.device, dtype)(ctx, shape, dtype, input, weight, bias, eps, output,
                                                                    mean, rstd);
}

void layer_norm_backward(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias) {
  shape.validate("layer_norm_backward");
  if (grad_weight != nullptr && weight == nullptr) {
    throw ValueError("layer_norm_backward: grad_weight asked for without a weight");
  }
  layer_norm_backward_kernels().get("layer_norm_backward", ctx.device, dtype)(
      ctx, shape, dtype, grad_output, input, weight, mean, rstd, grad_input, grad_weight, grad_bias);
}

}  // namespace sublet::ops
