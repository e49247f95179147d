#pragma once
// Kernel tables of the fused linear with bias and of its float32 weight gradient (ops/linear_bias.h). The CPU kernels register in
// ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// A kernel returns false, writing nothing, when it cannot take the call (see linear_bias).
#include "ops/kernel_table.h"
#include "ops/linear_bias.h"

namespace sublet::ops {

using LinearBiasKernel = bool(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, void* out,
                              const void* x, const void* w, const void* bias);

using LinearWeightGradFloat32Kernel = bool(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry,
                                           float* grad_w, float* grad_bias, const void* grad_out, const void* x);

inline KernelTable<LinearWeightGradFloat32Kernel>& linear_weight_grad_float32_kernels() {
  static constinit KernelTable<LinearWeightGradFloat32Kernel> table;
  return table;
}

inline KernelTable<LinearBiasKernel>& linear_bias_kernels() {
  static constinit KernelTable<LinearBiasKernel> table;
  return table;
}

}  // namespace sublet::ops
