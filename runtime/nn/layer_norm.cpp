#include "runtime/nn/layer_norm.h"

#include "core/errors.h"
#include "runtime/factories.h"

namespace sublet::nn {

LayerNorm::LayerNorm(const LayerNormOptions& options) : Module("LayerNorm"), options_(options) {
  const Shape shape(options.normalized_shape().begin(), options.normalized_shape().end());
  if (shape.empty() || shape_numel(shape) <= 0) {
    throw ValueError("LayerNorm: normalized_shape must be non-empty with positive sizes, got " + shape_str(shape));
  }
  if (options.elementwise_affine()) {
    weight = register_parameter("weight", ones(shape, options.dtype()));
    if (options.bias()) bias = register_parameter("bias", zeros(shape, options.dtype()));
  }
}

Tensor LayerNorm::forward(const Tensor& input) {
  return functional::layer_norm(input, options_.normalized_shape(), weight, bias, options_.eps());
}

Tensor LayerNorm::forward_as(const Tensor& input, DType output_dtype) {
  return call_with_hooks(input, [this, output_dtype](const Tensor& x) {
    return functional::layer_norm(x, options_.normalized_shape(), weight, bias, options_.eps(), output_dtype);
  });
}

functional::AddLayerNorm LayerNorm::forward_add(const Tensor& residual, const Tensor& branch,
                                                std::optional<DType> output_dtype) {
  Tensor sum;
  Tensor normalized = call_with_hooks(residual, [&](const Tensor& r) {
    functional::AddLayerNorm result = functional::add_layer_norm(r, branch, options_.normalized_shape(), weight, bias,
                                                                 options_.eps(), output_dtype);
    sum = result.sum;
    return result.normalized;
  });
  return {sum, normalized};
}

}  // namespace sublet::nn
