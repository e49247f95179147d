#pragma once
// Kernel tables of scaled dot-product attention (ops/attention.h). The CPU kernels register in
// ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
#include "ops/attention.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using AttentionForwardKernel = void(const Context& ctx, const AttentionShape& shape, DType dtype,
    ConstAttentionRef query, ConstAttentionRef key, ConstAttentionRef value, AttentionRef out, void* lse);
using AttentionBackwardKernel = void(const Context& ctx, const AttentionShape& shape, DType dtype,
    ConstAttentionRef query, ConstAttentionRef key, ConstAttentionRef value, ConstAttentionRef out,
    ConstAttentionRef grad_out, const void* lse, AttentionRef grad_query, AttentionRef grad_key,
    AttentionRef grad_value);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<AttentionForwardKernel>& attention_forward_kernels() {
  static constinit KernelTable<AttentionForwardKernel> table;
  return table;
}
inline KernelTable<AttentionBackwardKernel>& attention_backward_kernels() {
  static constinit KernelTable<AttentionBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
