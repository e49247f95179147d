#pragma once
// Kernel tables of fused batch norm + ReLU (ops/batch_norm_relu.h): CUDA, and the CPU for float32/float64 NCHW.
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/batch_norm_relu.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using BatchNormReluForwardKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* input, const void* residual, const void* weight, const void* bias, void* running_mean,
    void* running_var, double momentum, double eps, void* output, void* save_mean, void* save_invstd);
using BatchNormReluBackwardKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* grad_output, const void* output, const void* input, const void* weight, const void* save_mean,
    const void* save_invstd, void* grad_input, void* grad_weight, void* grad_bias, void* grad_residual);

// The backward of a forward without a residual, given its bias: the ReLU's mask recomputed from
// the input and the forward's coefficients instead of read from `output` (ops/batch_norm_relu.h).
using BatchNormReluBackwardInputMaskKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* grad_output, const void* output, const void* input, const void* weight, const void* bias,
    const void* save_mean, const void* save_invstd, void* grad_input, void* grad_weight, void* grad_bias);

// The forward also counting the batch (as BatchNormForwardTrainingCountingKernel, ops/batch_norm_kernels.h).
using BatchNormReluForwardCountingKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype,
    const void* input, const void* residual, const void* weight, const void* bias, void* running_mean,
    void* running_var, double momentum, double eps, void* output, void* save_mean, void* save_invstd,
    std::int64_t* num_batches_tracked);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<BatchNormReluForwardCountingKernel>& batch_norm_relu_forward_counting_kernels() {
  static constinit KernelTable<BatchNormReluForwardCountingKernel> table;
  return table;
}
inline KernelTable<BatchNormReluForwardKernel>& batch_norm_relu_forward_kernels() {
  static constinit KernelTable<BatchNormReluForwardKernel> table;
  return table;
}
inline KernelTable<BatchNormReluBackwardKernel>& batch_norm_relu_backward_kernels() {
  static constinit KernelTable<BatchNormReluBackwardKernel> table;
  return table;
}

inline KernelTable<BatchNormReluBackwardInputMaskKernel>& batch_norm_relu_backward_input_mask_kernels() {
  static constinit KernelTable<BatchNormReluBackwardInputMaskKernel> table;
  return table;
}

}  // namespace sublet::ops
