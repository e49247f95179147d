#pragma once
// Kernel tables of the global norm and the clip scale (ops/multi_tensor_norm.h), keyed by the
// norm's dtype (float32 or float64); each kernel reads every tensor in its own dtype. The CPU
// kernels register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in
// ops/cuda/register_cuda_kernels.cpp.
#include "ops/kernel_table.h"
#include "ops/multi_tensor_norm.h"

namespace sublet::ops {

using MultiTensorNormKernel = void(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors,
                                   double norm_type, void* norm);
using MultiTensorClipScaleKernel = void(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors,
                                        const void* norm, double max_norm);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<MultiTensorNormKernel>& multi_tensor_norm_kernels() {
  static constinit KernelTable<MultiTensorNormKernel> table;
  return table;
}
inline KernelTable<MultiTensorClipScaleKernel>& multi_tensor_clip_scale_kernels() {
  static constinit KernelTable<MultiTensorClipScaleKernel> table;
  return table;
}

}  // namespace sublet::ops
