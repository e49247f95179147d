#pragma once
// Kernel tables of fused optimizer updates (ops/optim_update.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/optim_update.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using SgdUpdateKernel = void(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors,
    const SgdHyper& hyper, const UpdateScalars& scalars);
using AdamUpdateKernel = void(const Context& ctx, DType dtype, std::span<const AdamTensor> tensors,
    const AdamHyper& hyper, const UpdateScalars& scalars);
using MarkNonFiniteKernel = void(const Context& ctx, DType dtype, std::span<const FiniteCheckTensor> tensors,
    float* found_inf);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<SgdUpdateKernel>& sgd_update_kernels() {
  static constinit KernelTable<SgdUpdateKernel> table;
  return table;
}
inline KernelTable<AdamUpdateKernel>& adam_update_kernels() {
  static constinit KernelTable<AdamUpdateKernel> table;
  return table;
}
inline KernelTable<MarkNonFiniteKernel>& mark_non_finite_kernels() {
  static constinit KernelTable<MarkNonFiniteKernel> table;
  return table;
}

}  // namespace sublet::ops
