#pragma once
// The CUDA kernels of the convolution + batch norm fusion (ops/conv_bn_fusion.h): the entry that
// runs cuDNN's fused plan or composes the pass (ops/cuda/conv_bn_fusion_cuda.cpp), and the
// element-wise and per-channel kernels the composition and the batch norm around it use
// (ops/cuda/conv_bn_fusion.cu). float32, bfloat16 and float16 activations, NCHW or NHWC.
#include "ops/conv_bn_fusion.h"

namespace sublet::ops::cuda {

bool conv2d_scale_bias_relu_genstats(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input,
                                     const float* scale, const float* bias, const void* weight, void* output,
                                     float* sum, float* sqsum, bool allow_fused);
bool conv2d_scale_bias_relu_genstats_fused(const Context& ctx, const Conv2dShape& shape, DType dtype, bool prologue,
                                           bool stats);
void scale_bias_relu(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                     const float* scale, const float* bias, void* output);
// sum[c] and sqsum[c] (float32, overwritten) of an activation's channels.
void channel_sums(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input, float* sum,
                  float* sqsum);
void batch_norm_stats_from_sums(const Context& ctx, std::int64_t channels, std::int64_t count, const float* sum,
                                const float* sqsum, const float* weight, const float* bias, float* running_mean,
                                float* running_var, double momentum, double eps, float* save_mean, float* save_invstd,
                                float* scale, float* shift, std::int64_t* num_batches_tracked);

}  // namespace sublet::ops::cuda
