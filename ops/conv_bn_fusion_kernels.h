#pragma once
// Kernel tables of the convolution + batch norm fusion (ops/conv_bn_fusion.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
#include "ops/conv_bn_fusion.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

// Returns whether it ran as one fused kernel (false: the composition ran). allow_fused false
// asks for the composition.
using ConvScaleBiasReluGenStatsKernel = bool(const Context& ctx, const Conv2dShape& shape, DType dtype,
    const void* input, const float* scale, const float* bias, const void* weight, void* output, float* sum,
    float* sqsum, bool allow_fused);
// Whether the backend has a fused kernel for the call (registered only where one may exist).
using ConvScaleBiasReluGenStatsFusedKernel = bool(const Context& ctx, const Conv2dShape& shape, DType dtype,
    bool prologue, bool stats);
using ScaleBiasReluKernel = void(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
    const float* scale, const float* bias, void* output);
using BatchNormStatsFromSumsKernel = void(const Context& ctx, std::int64_t channels, std::int64_t count,
    const float* sum, const float* sqsum, const float* weight, const float* bias, float* running_mean,
    float* running_var, double momentum, double eps, float* save_mean, float* save_invstd, float* scale,
    float* shift, std::int64_t* num_batches_tracked);

inline KernelTable<ConvScaleBiasReluGenStatsKernel>& conv2d_scale_bias_relu_genstats_kernels() {
  static constinit KernelTable<ConvScaleBiasReluGenStatsKernel> table;
  return table;
}
inline KernelTable<ConvScaleBiasReluGenStatsFusedKernel>& conv2d_scale_bias_relu_genstats_fused_kernels() {
  static constinit KernelTable<ConvScaleBiasReluGenStatsFusedKernel> table;
  return table;
}
inline KernelTable<ScaleBiasReluKernel>& scale_bias_relu_kernels() {
  static constinit KernelTable<ScaleBiasReluKernel> table;
  return table;
}
// Registered under float32 (the statistics' dtype), whatever the activations' dtype.
inline KernelTable<BatchNormStatsFromSumsKernel>& batch_norm_stats_from_sums_kernels() {
  static constinit KernelTable<BatchNormStatsFromSumsKernel> table;
  return table;
}

}  // namespace sublet::ops
