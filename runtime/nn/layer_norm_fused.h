#pragma once
// The layer norm fronts' shared core (runtime/nn/functional_layer_norm.cpp), for the fronts that
// build on it (functional::layer_norm, functional::add_layer_norm).
#include <utility>

#include "ops/layer_norm.h"
#include "runtime/tensor.h"

namespace sublet::nn::detail {

// Checks normalized_shape against the input's trailing dimensions and weight/bias (undefined,
// or like the input with that shape); returns the rows. Errors name `op`.
ops::LayerNormShape layer_norm_rows(const char* op, const Tensor& input, const Shape& normalized, const Tensor& weight,
                                    const Tensor& bias);
// DTypeError naming `op` unless dtype is floating.
void check_layer_norm_output_dtype(const char* op, DType dtype);

// One kernel each way (ops::layer_norm_fused_*; the caller checked layer_norm_fused_available):
// the rows of input, plus branch (output_dtype, may be undefined) written to the sum, normalised
// into out_dtype, with their autograd node. Returns {sum, or undefined without a branch; output}.
std::pair<Tensor, Tensor> fused_layer_norm(const char* op, const Tensor& input, const Tensor& branch,
                                           const Shape& normalized, const ops::LayerNormShape& rows,
                                           const Tensor& weight, const Tensor& bias, double eps, DType out_dtype);

}  // namespace sublet::nn::detail
