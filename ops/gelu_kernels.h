#pragma once
// Kernel tables of GELU (ops/gelu.h).
#include "ops/gelu.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using GeluForwardKernel = void(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
    const void* input, void* output);
using GeluBackwardKernel = void(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
    const void* grad_output, const void* input, void* grad_input);

inline KernelTable<GeluForwardKernel>& gelu_forward_kernels() {
  static constinit KernelTable<GeluForwardKernel> table;
  return table;
}
inline KernelTable<GeluBackwardKernel>& gelu_backward_kernels() {
  static constinit KernelTable<GeluBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
