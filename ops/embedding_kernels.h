#pragma once
// Kernel tables of the embedding lookup (ops/embedding.h).
#include "ops/embedding.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using EmbeddingForwardKernel = void(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* weight,
    const std::int64_t* indices, void* output);
using EmbeddingBackwardKernel = void(const Context& ctx, const EmbeddingShape& shape, DType dtype,
    const void* grad_output, const std::int64_t* indices, bool deterministic, void* grad_weight);

inline KernelTable<EmbeddingForwardKernel>& embedding_forward_kernels() {
  static constinit KernelTable<EmbeddingForwardKernel> table;
  return table;
}
inline KernelTable<EmbeddingBackwardKernel>& embedding_backward_kernels() {
  static constinit KernelTable<EmbeddingBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
