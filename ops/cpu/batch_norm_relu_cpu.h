#pragma once
// CPU fused training-mode batch norm + (residual add) + ReLU (ops/batch_norm_relu.h), float32 and
// float64 NCHW. The same statistics and gradient sums as batch norm's CPU kernels
// (batch_norm_cpu_detail.h), so the values are relu(batch_norm(x) + residual)'s bit for bit, in
// fewer passes: the forward writes its output once (no add and relu passes over it), the
// backward masks the gradient while it sums it (no relu-backward pass).
#include "ops/batch_norm.h"

namespace sublet::ops::cpu {

// residual may be nullptr.
template <typename T>
void batch_norm_relu_forward_training(const BatchNormShape& shape, const T* input, const T* residual,
                                      const T* weight, const T* bias, T* running_mean, T* running_var,
                                      double momentum, double eps, T* output, T* save_mean, T* save_invstd);

// output: the forward's result (the ReLU's mask); any of grad_input, grad_weight, grad_bias,
// grad_residual may be nullptr.
template <typename T>
void batch_norm_relu_backward_training(const BatchNormShape& shape, const T* grad_output, const T* output,
                                       const T* input, const T* weight, const T* save_mean,
                                       const T* save_invstd, T* grad_input, T* grad_weight, T* grad_bias,
                                       T* grad_residual);

}  // namespace sublet::ops::cpu
