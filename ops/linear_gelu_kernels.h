#pragma once
// Kernel tables of the GELU in GEMM epilogues (ops/linear_gelu.h). The CUDA kernels register in
// ops/cuda/register_cuda_kernels.cpp; the CPU has none. A kernel returns false, writing nothing,
// when it cannot take the call.
#include "ops/kernel_table.h"
#include "ops/linear_gelu.h"

namespace sublet::ops {

using LinearGeluForwardKernel = bool(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry, void* out,
                                     void* pre, const void* x, const void* w, const void* bias);
using LinearGeluBackwardKernel = bool(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry,
                                      void* grad_pre, void* grad_bias, const void* grad_out, const void* w,
                                      const void* pre);

inline KernelTable<LinearGeluForwardKernel>& linear_gelu_forward_kernels() {
  static constinit KernelTable<LinearGeluForwardKernel> table;
  return table;
}

inline KernelTable<LinearGeluBackwardKernel>& linear_gelu_backward_kernels() {
  static constinit KernelTable<LinearGeluBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
