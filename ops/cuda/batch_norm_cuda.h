#pragma once
// CUDA batch norm behind ops/batch_norm.h (same arguments, device pointers; already validated).
#include "ops/batch_norm.h"

namespace sublet::ops::cuda {

void batch_norm_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                                 const void* weight, const void* bias, void* running_mean, void* running_var,
                                 double momentum, double eps, void* output, void* save_mean, void* save_invstd);
void batch_norm_forward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                             const void* weight, const void* bias, const void* running_mean,
                             const void* running_var, double eps, void* output);
void batch_norm_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                  const void* grad_output, const void* input, const void* weight,
                                  const void* save_mean, const void* save_invstd, void* grad_input,
                                  void* grad_weight, void* grad_bias);
// Own kernels (cuDNN has no backward for the inference form).
void batch_norm_backward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                              const void* grad_output, const void* input, const void* weight,
                              const void* running_mean, const void* running_var, double eps, void* grad_input,
                              void* grad_weight, void* grad_bias);

}  // namespace sublet::ops::cuda
