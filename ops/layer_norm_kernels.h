#pragma once
// Kernel tables of layer normalisation (ops/layer_norm.h).
#include "ops/kernel_table.h"
#include "ops/layer_norm.h"

namespace sublet::ops {

using LayerNormForwardKernel = void(const Context& ctx, const LayerNormShape& shape, DType dtype, const void* input,
    const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd);
using LayerNormBackwardKernel = void(const Context& ctx, const LayerNormShape& shape, DType dtype,
    const void* grad_output, const void* input, const void* weight, const void* mean, const void* rstd,
    void* grad_input, void* grad_weight, void* grad_bias);

// The general forms (CUDA only), by the input's dtype.
using LayerNormFusedForwardKernel = void(const Context& ctx, const LayerNormForwardArgs& args);
using LayerNormFusedBackwardKernel = void(const Context& ctx, const LayerNormBackwardArgs& args);

inline KernelTable<LayerNormForwardKernel>& layer_norm_forward_kernels() {
  static constinit KernelTable<LayerNormForwardKernel> table;
  return table;
}
inline KernelTable<LayerNormBackwardKernel>& layer_norm_backward_kernels() {
  static constinit KernelTable<LayerNormBackwardKernel> table;
  return table;
}
inline KernelTable<LayerNormFusedForwardKernel>& layer_norm_fused_forward_kernels() {
  static constinit KernelTable<LayerNormFusedForwardKernel> table;
  return table;
}
inline KernelTable<LayerNormFusedBackwardKernel>& layer_norm_fused_backward_kernels() {
  static constinit KernelTable<LayerNormFusedBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
