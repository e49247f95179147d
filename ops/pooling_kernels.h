#pragma once
// Kernel tables of 2-D pooling (ops/pooling.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/pooling.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using MaxPool2dForwardKernel = void(const Context& ctx, const Pool2dShape& shape, DType dtype,
    const void* input, void* output, std::int64_t* indices);
using MaxPool2dBackwardKernel = void(const Context& ctx, const Pool2dShape& shape, DType dtype,
    const void* grad_output, const std::int64_t* indices, void* grad_input);
using MaxPool2dForwardPositionsKernel = void(const Context& ctx, const Pool2dShape& shape, DType dtype,
    const void* input, void* output, std::uint8_t* positions);
using MaxPool2dBackwardPositionsKernel = void(const Context& ctx, const Pool2dShape& shape, DType dtype,
    const void* grad_output, const std::uint8_t* positions, void* grad_input);
using AvgPool2dForwardKernel = void(const Context& ctx, const Pool2dShape& shape, DType dtype,
    const void* input, void* output, bool count_include_pad);
using AvgPool2dBackwardKernel = void(const Context& ctx, const Pool2dShape& shape, DType dtype,
    const void* grad_output, void* grad_input, bool count_include_pad);
using AdaptiveAvgPool2dForwardKernel = void(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
    const void* input, void* output);
using AdaptiveAvgPool2dBackwardKernel = void(const Context& ctx, const AdaptivePool2dShape& shape, DType dtype,
    const void* grad_output, void* grad_input);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<MaxPool2dForwardKernel>& max_pool2d_forward_kernels() {
  static constinit KernelTable<MaxPool2dForwardKernel> table;
  return table;
}
inline KernelTable<MaxPool2dBackwardKernel>& max_pool2d_backward_kernels() {
  static constinit KernelTable<MaxPool2dBackwardKernel> table;
  return table;
}
// One-byte window positions (ops/pooling.h); CUDA only.
inline KernelTable<MaxPool2dForwardPositionsKernel>& max_pool2d_forward_positions_kernels() {
  static constinit KernelTable<MaxPool2dForwardPositionsKernel> table;
  return table;
}
inline KernelTable<MaxPool2dBackwardPositionsKernel>& max_pool2d_backward_positions_kernels() {
  static constinit KernelTable<MaxPool2dBackwardPositionsKernel> table;
  return table;
}
inline KernelTable<AvgPool2dForwardKernel>& avg_pool2d_forward_kernels() {
  static constinit KernelTable<AvgPool2dForwardKernel> table;
  return table;
}
inline KernelTable<AvgPool2dBackwardKernel>& avg_pool2d_backward_kernels() {
  static constinit KernelTable<AvgPool2dBackwardKernel> table;
  return table;
}
inline KernelTable<AdaptiveAvgPool2dForwardKernel>& adaptive_avg_pool2d_forward_kernels() {
  static constinit KernelTable<AdaptiveAvgPool2dForwardKernel> table;
  return table;
}
inline KernelTable<AdaptiveAvgPool2dBackwardKernel>& adaptive_avg_pool2d_backward_kernels() {
  static constinit KernelTable<AdaptiveAvgPool2dBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
