#pragma once
// Kernel tables of batched matrix product (ops/matmul.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/matmul.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using MatmulKernel = void(const Context& ctx, DType dtype, const MatmulGeometry& geometry, void* out,
    const void* a, const void* b);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<MatmulKernel>& matmul_kernels() {
  static constinit KernelTable<MatmulKernel> table;
  return table;
}

}  // namespace sublet::ops
