#pragma once
// Kernel tables of dropout (ops/dropout.h): one kernel serves forward and backward (the same
// masked scaling).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/dropout.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using DropoutKernel = void(const Context& ctx, std::int64_t numel, DType dtype, const void* input, double p,
    std::uint64_t seed, std::uint64_t offset, void* output);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<DropoutKernel>& dropout_kernels() {
  static constinit KernelTable<DropoutKernel> table;
  return table;
}

}  // namespace sublet::ops
