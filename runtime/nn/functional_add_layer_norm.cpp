// add_layer_norm: the residual add and the layer norm of its sum, one node where a fused kernel
// takes the dtypes, the two ops elsewhere.
#include "runtime/nn/add_layer_norm.h"

#include "runtime/autocast.h"
#include "runtime/kernel_args.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/layer_norm_fused.h"

namespace sublet::nn::functional {

namespace {

bool is_half(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

// The fused kernel gives the two ops' bits when nothing is promoted or cast on the way: the sum
// in the residual's dtype, the norm in that dtype too (autocast would take a 16-bit sum to
// float32 first), weight and bias like it, and the branch already in the output's dtype.
bool fusable(const Tensor& residual, const Tensor& branch, const Tensor& weight, const Tensor& bias, DType out_dtype) {
  const DType dtype = residual.dtype();
  if (branch.dtype() != out_dtype || branch.sizes() != residual.sizes() || branch.device() != residual.device()) {
    return false;
  }
  if (is_half(dtype) && amp::autocast_is_enabled()) return false;
  for (const Tensor* t : {&weight, &bias}) {
    if (t->defined() && (t->dtype() != dtype || t->device() != residual.device())) return false;
  }
  return ops::layer_norm_fused_available(residual.device().type, dtype, out_dtype);
}

}  // namespace

AddLayerNorm add_layer_norm(const Tensor& residual, const Tensor& branch, std::vector<std::int64_t> normalized_shape,
                            const Tensor& weight, const Tensor& bias, double eps, std::optional<DType> output_dtype) {
  const char* op = "add_layer_norm";
  sublet::detail::check_defined(op, residual);
  sublet::detail::check_defined(op, branch);
  if (output_dtype) nn::detail::check_layer_norm_output_dtype(op, *output_dtype);
  if (residual.dtype() != DType::Int64 &&
      fusable(residual, branch, weight, bias, output_dtype.value_or(residual.dtype()))) {
    const Shape normalized(normalized_shape.begin(), normalized_shape.end());
    const ops::LayerNormShape rows = nn::detail::layer_norm_rows(op, residual, normalized, weight, bias);
    auto [sum, out] = nn::detail::fused_layer_norm(op, residual, branch, normalized, rows, weight, bias, eps,
                                                   output_dtype.value_or(residual.dtype()));
    return {sum, out};
  }
  Tensor sum = residual + branch;
  Tensor out = layer_norm(sum, std::move(normalized_shape), weight, bias, eps, output_dtype);
  return {std::move(sum), std::move(out)};
}

}  // namespace sublet::nn::functional
