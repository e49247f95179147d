#pragma once
// Kernel tables of reductions, scatter and gather (ops/reduce.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/reduce.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using ReduceSumKernel = void(const Context& ctx, DType dtype, const ReduceGeometry& geometry, void* out,
    const void* in, double scale);
using ReduceExtremumKernel = void(const Context& ctx, ExtremumKind kind, DType dtype,
    const ReduceGeometry& geometry, void* values, std::int64_t* indices, const void* in);
using ScatterAddKernel = void(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
    const std::int64_t* indices, const void* src);
using GatherKernel = void(const Context& ctx, DType dtype, const ScatterGeometry& geometry, void* out,
    const std::int64_t* indices, const void* in);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<ReduceSumKernel>& reduce_sum_kernels() {
  static constinit KernelTable<ReduceSumKernel> table;
  return table;
}
inline KernelTable<ReduceExtremumKernel>& reduce_extremum_kernels() {
  static constinit KernelTable<ReduceExtremumKernel> table;
  return table;
}
inline KernelTable<ScatterAddKernel>& scatter_add_kernels() {
  static constinit KernelTable<ScatterAddKernel> table;
  return table;
}
inline KernelTable<GatherKernel>& gather_kernels() {
  static constinit KernelTable<GatherKernel> table;
  return table;
}

}  // namespace sublet::ops
