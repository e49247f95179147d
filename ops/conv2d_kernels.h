#pragma once
// Kernel tables of 2-D convolution (ops/conv2d.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/conv2d.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using Conv2dForwardKernel = void(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input,
    const void* weight, const void* bias, void* output);
using Conv2dBackwardInputKernel = void(const Context& ctx, const Conv2dShape& shape, DType dtype,
    const void* grad_output, const void* weight, void* grad_input);
using Conv2dBackwardInputAccumulateKernel = bool(const Context& ctx, const Conv2dShape& shape, DType dtype,
    const void* grad_output, const void* weight, void* grad_input);
using Conv2dBackwardWeightKernel = void(const Context& ctx, const Conv2dShape& shape, DType dtype,
    const void* grad_output, const void* input, void* grad_weight, void* grad_bias);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<Conv2dForwardKernel>& conv2d_forward_kernels() {
  static constinit KernelTable<Conv2dForwardKernel> table;
  return table;
}
inline KernelTable<Conv2dBackwardInputKernel>& conv2d_backward_input_kernels() {
  static constinit KernelTable<Conv2dBackwardInputKernel> table;
  return table;
}
// Optional: backends without an accumulating pass register nothing (find() gives nullptr).
inline KernelTable<Conv2dBackwardInputAccumulateKernel>& conv2d_backward_input_accumulate_kernels() {
  static constinit KernelTable<Conv2dBackwardInputAccumulateKernel> table;
  return table;
}
inline KernelTable<Conv2dBackwardWeightKernel>& conv2d_backward_weight_kernels() {
  static constinit KernelTable<Conv2dBackwardWeightKernel> table;
  return table;
}

}  // namespace sublet::ops
