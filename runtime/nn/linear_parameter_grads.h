#pragma once
// The parameters of the fused CUDA linear nodes (functional_linear.cpp, functional_mlp.cpp) under
// autocast, and their gradients. A float32 parameter is the node's own autograd input while the
// GEMMs read its 16-bit copy from the autocast cache, so the weight's gradient comes out of the
// GEMM in float32 (no 16-bit gradient, no cast node). With tuning().float32_weight_gradients
// off the 16-bit copy is the input again, as before.
#include "runtime/tensor.h"

namespace sublet::nn::detail {

struct FusedParameter {
  Tensor input;  // the node's autograd input: the float32 parameter, or the tensor the GEMM reads
  Tensor data;   // what the GEMM reads: autocast's 16-bit copy, or the tensor as it is
};

// `t` as a fused node's operand: input = t and data = its cached 16-bit copy (no cast node) where
// autocast lowers a float32 t and the switch is on; else input = data = amp::to_lower(t).
FusedParameter fused_parameter(const Tensor& t);

struct LinearParameterGrads {
  Tensor weight;  // [n, k], or undefined when not asked for
  Tensor bias;    // [n], or undefined when not asked for
};

// The gradients of a linear's weight (grad_out^T x) and bias (grad_out's column sums) from
// contiguous grad_out [m, n] and x [m, k] (x may be undefined when the weight's is not wanted),
// in the dtypes of the node's inputs. A float32 gradient of 16-bit operands comes from one GEMM
// that accumulates in float32 and stores float32 (ops::linear_weight_grad_float32), the bias's
// from its epilogue; where that kernel declines, the 16-bit product cast up, as the cast nodes did.
LinearParameterGrads linear_parameter_grads(const Tensor& grad_out, const Tensor& x, bool want_weight,
                                            DType weight_dtype, bool want_bias, DType bias_dtype);

}  // namespace sublet::nn::detail
