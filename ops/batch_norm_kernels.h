#pragma once
// Kernel tables of batch normalisation (ops/batch_norm.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/batch_norm.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using BatchNormForwardTrainingKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* input, const void* weight, const void* bias, void* running_mean, void* running_var,
    double momentum, double eps, void* output, void* save_mean, void* save_invstd);
using BatchNormForwardEvalKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* input, const void* weight, const void* bias, const void* running_mean, const void* running_var,
    double eps, void* output);
using BatchNormBackwardTrainingKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* grad_output, const void* input, const void* weight, const void* save_mean,
    const void* save_invstd, void* grad_input, void* grad_weight, void* grad_bias);
using BatchNormBackwardEvalKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* grad_output, const void* input, const void* weight, const void* running_mean,
    const void* running_var, double eps, void* grad_input, void* grad_weight, void* grad_bias);

// The same, also counting the batch: *num_batches_tracked (an int64 on the device) += 1 inside
// the kernels' own launches. Registered where a backend can fold the count in
// (ops/cuda/batch_norm_split.cu); elsewhere ops::batch_norm_forward_training counts apart.
using BatchNormForwardTrainingCountingKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* input, const void* weight, const void* bias, void* running_mean, void* running_var,
    double momentum, double eps, void* output, void* save_mean, void* save_invstd, std::int64_t* num_batches_tracked);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<BatchNormForwardTrainingCountingKernel>& batch_norm_forward_training_counting_kernels() {
  static constinit KernelTable<BatchNormForwardTrainingCountingKernel> table;
  return table;
}
inline KernelTable<BatchNormForwardTrainingKernel>& batch_norm_forward_training_kernels() {
  static constinit KernelTable<BatchNormForwardTrainingKernel> table;
  return table;
}
inline KernelTable<BatchNormForwardEvalKernel>& batch_norm_forward_eval_kernels() {
  static constinit KernelTable<BatchNormForwardEvalKernel> table;
  return table;
}
inline KernelTable<BatchNormBackwardTrainingKernel>& batch_norm_backward_training_kernels() {
  static constinit KernelTable<BatchNormBackwardTrainingKernel> table;
  return table;
}
inline KernelTable<BatchNormBackwardEvalKernel>& batch_norm_backward_eval_kernels() {
  static constinit KernelTable<BatchNormBackwardEvalKernel> table;
  return table;
}

}  // namespace sublet::ops
