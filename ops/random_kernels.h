#pragma once
// Kernel tables of random fills (ops/random.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/random.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using FillUniformKernel = void(const Context& ctx, DType dtype, void* dst, std::int64_t count, double low,
    double high, std::mt19937_64& engine);
using FillNormalKernel = void(const Context& ctx, DType dtype, void* dst, std::int64_t count, double mean,
    double stddev, std::mt19937_64& engine);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<FillUniformKernel>& fill_uniform_kernels() {
  static constinit KernelTable<FillUniformKernel> table;
  return table;
}
inline KernelTable<FillNormalKernel>& fill_normal_kernels() {
  static constinit KernelTable<FillNormalKernel> table;
  return table;
}

}  // namespace sublet::ops
