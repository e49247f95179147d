#pragma once
// Kernel tables of casting copies and fills (ops/copy.h). The copy table is keyed by the
// destination's dtype; each copy kernel reads every source dtype its device supports.
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/copy.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using CopyKernel = void(const Context& ctx, const Shape& sizes, DType dst_dtype, StridedRef dst,
    DType src_dtype, ConstStridedRef src);
using FillKernel = void(const Context& ctx, DType dtype, const Shape& sizes, StridedRef dst, double value);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<CopyKernel>& copy_kernels() {
  static constinit KernelTable<CopyKernel> table;
  return table;
}
inline KernelTable<FillKernel>& fill_kernels() {
  static constinit KernelTable<FillKernel> table;
  return table;
}

}  // namespace sublet::ops
