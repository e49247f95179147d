#pragma once
// Kernel tables of softmax (ops/softmax.h).
#include "ops/kernel_table.h"
#include "ops/softmax.h"

namespace sublet::ops {

using SoftmaxForwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* input,
    void* output);
using SoftmaxBackwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype,
    const void* grad_output, const void* output, void* grad_input);

inline KernelTable<SoftmaxForwardKernel>& softmax_forward_kernels() {
  static constinit KernelTable<SoftmaxForwardKernel> table;
  return table;
}
inline KernelTable<SoftmaxBackwardKernel>& softmax_backward_kernels() {
  static constinit KernelTable<SoftmaxBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
