#pragma once
// CPU batch norm: channels spread over the OpenMP threads. Sums are vectorised within each
// H*W run and accumulated in double across the batch, so that float32 statistics over large
// batches do not lose precision.
#include "ops/batch_norm.h"
#include "ops/context.h"

namespace sublet::ops::cpu {

template <typename T>
void batch_norm_forward_training(const BatchNormShape& shape, const T* input, const T* weight,
                                 const T* bias, T* running_mean, T* running_var, double momentum,
                                 double eps, T* output, T* save_mean, T* save_invstd);
template <typename T>
void batch_norm_forward_eval(const BatchNormShape& shape, const T* input, const T* weight,
                             const T* bias, const T* running_mean, const T* running_var,
                             double eps, T* output);
template <typename T>
void batch_norm_backward_training(const BatchNormShape& shape, const T* grad_output,
                                  const T* input, const T* weight, const T* save_mean,
                                  const T* save_invstd, T* grad_input, T* grad_weight,
                                  T* grad_bias);
template <typename T>
void batch_norm_backward_eval(const BatchNormShape& shape, const T* grad_output, const T* input,
                              const T* weight, const T* running_mean, const T* running_var,
                              double eps, T* grad_input, T* grad_weight, T* grad_bias);

}  // namespace sublet::ops::cpu
