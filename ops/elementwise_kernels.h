#pragma once
// Kernel tables of elementwise ops (ops/elementwise.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/elementwise.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using UnaryKernel = void(const Context& ctx, UnaryOp op, DType dtype, const Shape& sizes, StridedRef out,
    ConstStridedRef in, UnaryParams params);
using BinaryKernel = void(const Context& ctx, BinaryOp op, DType dtype, const Shape& sizes, StridedRef out,
    ConstStridedRef a, ConstStridedRef b, double alpha);
using TernaryKernel = void(const Context& ctx, TernaryOp op, DType dtype, const Shape& sizes, StridedRef out,
    ConstStridedRef a, ConstStridedRef b, ConstStridedRef c, double value);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<UnaryKernel>& unary_kernels() {
  static constinit KernelTable<UnaryKernel> table;
  return table;
}
inline KernelTable<BinaryKernel>& binary_kernels() {
  static constinit KernelTable<BinaryKernel> table;
  return table;
}
inline KernelTable<TernaryKernel>& ternary_kernels() {
  static constinit KernelTable<TernaryKernel> table;
  return table;
}

}  // namespace sublet::ops
