#pragma once
// A convolution with the batch norms around it folded in, the forward half of NVIDIA's ResNet-50
// fusions (runtime/nn/conv_bn_fusion.h composes them into training steps):
//
//   output = conv(prologue(input), weight)      prologue(x) = relu(x * scale[c] + bias[c])
//   sum[k] = sum of output[:, k], sqsum[k] = sum of output[:, k]^2   (the next batch norm's statistics)
//
// The prologue applies the previous batch norm (scale = weight * invstd, bias = bias - mean *
// scale) and its ReLU as the convolution reads its input, so the normalised activation is never
// written; the statistics come from the convolution's epilogue, so the next batch norm needs no
// statistics pass. Either half may be left out (scale or sum nullptr).
//
// CUDA: one cuDNN fused plan (ops/cuda/conv_bn_graph.h) where cuDNN has an engine for the shape
// and dtype; otherwise, and on the CPU, the same values composed of separate kernels (the
// prologue into a workspace, the convolution, a per-channel reduction). conv_bn_fusion_counts()
// says how many calls ran which way.
//
// Pointers are device memory of ctx.device. input, weight and output are of `dtype` (float32,
// bfloat16, float16; the CPU takes float32), laid out as shape.format; every per-channel vector
// (scale, bias, sum, sqsum and the statistics below) is float32.
#include <cstdint>

#include "core/dtype.h"
#include "ops/batch_norm.h"
#include "ops/context.h"
#include "ops/conv2d.h"

namespace sublet::ops {

enum class ConvBnRoute {
  Fastest,  // the fused plan where the backend has one, else the composition
  Unfused,  // always the composition (the reference the fused plan is checked against)
};

// Whether conv2d_scale_bias_relu_genstats runs this call as one fused kernel (builds and caches
// the plan on first ask; false on the CPU and where cuDNN has no engine).
bool conv2d_scale_bias_relu_genstats_fused(const Context& ctx, const Conv2dShape& shape, DType dtype, bool prologue,
                                           bool stats);

// scale and bias: [C_in], both or neither; sum and sqsum: [C_out], both or neither (overwritten).
// The convolution has no bias of its own. Throws ShapeError/DTypeError/ValueError naming the op.
void conv2d_scale_bias_relu_genstats(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input,
                                     const float* scale, const float* bias, const void* weight, void* output,
                                     float* sum, float* sqsum, ConvBnRoute route = ConvBnRoute::Fastest);

// The prologue alone: output = relu(input * scale[c] + bias[c]) (backward recomputes the
// activation the fused forward never wrote).
void scale_bias_relu(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                     const float* scale, const float* bias, void* output);

// A batch norm's statistics from the sums over `count` values per channel (training mode):
// mean = sum / count, var = sqsum / count - mean^2 (biased, clamped at 0), save_invstd =
// 1 / sqrt(var + eps); scale = weight * invstd and shift = bias - mean * scale (weight, bias
// nullptr: 1 and 0), the prologue's operands; running_mean and running_var (nullptr: none) move
// by momentum towards mean and the unbiased variance; *num_batches_tracked += 1 (nullptr: none).
void batch_norm_stats_from_sums(const Context& ctx, std::int64_t channels, std::int64_t count, const float* sum,
                                const float* sqsum, const float* weight, const float* bias, float* running_mean,
                                float* running_var, double momentum, double eps, float* save_mean, float* save_invstd,
                                float* scale, float* shift, std::int64_t* num_batches_tracked);

// Calls of conv2d_scale_bias_relu_genstats since the process started (or the last reset), by
// how they ran.
struct ConvBnFusionCounts {
  std::uint64_t fused = 0;
  std::uint64_t unfused_no_engine = 0;  // cuDNN had no fused engine for the shape and dtype
  std::uint64_t unfused_backend = 0;    // the device's backend has no fused kernel (the CPU)
  std::uint64_t unfused_requested = 0;  // ConvBnRoute::Unfused
};
ConvBnFusionCounts conv_bn_fusion_counts();
void reset_conv_bn_fusion_counts();

}  // namespace sublet::ops
