#pragma once
// CUDA side of ops/batch_norm_relu.h (same arguments, device pointers; already validated).
#include "ops/batch_norm_relu.h"

namespace sublet::ops::cuda {

void batch_norm_relu_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                                      const void* residual, const void* weight, const void* bias, void* running_mean,
                                      void* running_var, double momentum, double eps, void* output, void* save_mean,
                                      void* save_invstd);
void batch_norm_relu_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                       const void* grad_output, const void* output, const void* input,
                                       const void* weight, const void* save_mean, const void* save_invstd,
                                       void* grad_input, void* grad_weight, void* grad_bias, void* grad_residual);

}  // namespace sublet::ops::cuda
