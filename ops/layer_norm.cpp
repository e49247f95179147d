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

namespace {

bool is_half(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

bool pair_supported(DType dtype, DType output_dtype) {
  return output_dtype == dtype || (dtype == DType::Float32 && is_half(output_dtype));
}

void check_pair(const char* op, DType dtype, DType output_dtype) {
  if (!pair_supported(dtype, output_dtype)) {
    throw DTypeError(std::string(op) + ": output dtype " + dtype_name(output_dtype) + " with input dtype " +
                     dtype_name(dtype) + "; expected the input's dtype, or bfloat16/float16 for a float32 input");
  }
}

}  // namespace

bool layer_norm_fused_available(DeviceType device, DType dtype, DType output_dtype) {
  return pair_supported(dtype, output_dtype) && layer_norm_fused_forward_kernels().has(device, dtype) &&
         layer_norm_fused_backward_kernels().has(device, dtype);
}

void layer_norm_fused_forward(const Context& ctx, const LayerNormForwardArgs& args) {
  const char* op = "layer_norm";
  args.shape.validate(op);
  if (!(args.eps >= 0)) throw ValueError(std::string(op) + ": eps must be >= 0, got " + std::to_string(args.eps));
  check_pair(op, args.dtype, args.output_dtype);
  if (args.branch != nullptr && args.sum == nullptr) {
    throw ValueError(std::string(op) + ": a residual branch needs the sum's output");
  }
  layer_norm_fused_forward_kernels().get(op, ctx.device, args.dtype)(ctx, args);
}

void layer_norm_fused_backward(const Context& ctx, const LayerNormBackwardArgs& args) {
  const char* op = "layer_norm_backward";
  args.shape.validate(op);
  check_pair(op, args.dtype, args.output_dtype);
  if (args.grad_weight != nullptr && args.weight == nullptr) {
    throw ValueError(std::string(op) + ": grad_weight asked for without a weight");
  }
  layer_norm_fused_backward_kernels().get(op, ctx.device, args.dtype)(ctx, args);
}

}  // namespace sublet::ops
