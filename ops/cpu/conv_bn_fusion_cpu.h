#pragma once
// The CPU kernels of the convolution + batch norm fusion (ops/conv_bn_fusion.h): float32 and float64,
// NCHW. The convolution itself is the CPU convolution; these compose it with the
// prologue and the per-channel sums, the same values the fused CUDA plan computes.
#include "ops/conv_bn_fusion.h"

namespace sublet::ops::cpu {

bool conv2d_scale_bias_relu_genstats(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input,
                                     const float* scale, const float* bias, const void* weight, void* output,
                                     float* sum, float* sqsum, bool allow_fused);
void scale_bias_relu(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                     const float* scale, const float* bias, void* output);
void batch_norm_stats_from_sums(const Context& ctx, std::int64_t channels, std::int64_t count, const float* sum,
                                const float* sqsum, const float* weight, const float* bias, float* running_mean,
                                float* running_var, double momentum, double eps, float* save_mean, float* save_invstd,
                                float* scale, float* shift, std::int64_t* num_batches_tracked);

}  // namespace sublet::ops::cpu
