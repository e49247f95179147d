#pragma once
// Channels-last convolutions of narrow inputs (fewer than 8 channels: an RGB image's stem, e.g.
// ResNet's 7x7 stride-2 convolution of 3 channels) as im2col + one cuBLAS GEMM.
// Why: cuDNN's NHWC tensor-core engines read 16-byte channel vectors; with 3 channels it falls
// back to direct kernels (convolve_common_engine_float_NHWC, wgrad_alg0_engine_NHWC: PyTorch's
// step runs the same), slow for a stem. Unrolled, the product is
// [N*OH*OW, KH*KW*C] x [KH*KW*C, K], a tall GEMM the tensor cores take at memory speed.
//
// Layouts (channels-last): X [N, H, W, C], Y [N, OH, OW, K], W [K, KH, KW, C]. The column matrix
// holds row m = (n, oh, ow), column (r * KW + s) * C + c = X[n, oh*sh - ph + r*dh, ow*sw - pw +
// s*dw, c] or 0 outside the input, padded with zero columns to a multiple of 8 (16-byte rows for
// every dtype). It is a workspace, built in chunks of rows of at most `column_bytes`, and built
// again for the weight gradient (not kept between the passes: it is as large as the output).
// The weight is padded the same way into a small workspace. The weight gradient splits each
// chunk's rows into slices (ops/cuda/split_k_plan.h) with one float32 partial dW each, at most
// 8 MiB of them (one partial where a single one is larger), summed in a fixed order: the same
// bits on every run.
//
// Forward and weight gradient only: the input gradient (which a stem's input does not need)
// stays with cuDNN. float32 runs as TF32 when conv_algorithm_settings().allow_tf32, as cuDNN's
// convolutions do; bfloat16/float16 accumulate in float32. Bias terms stay with the caller.
// The kernel tables send only float32 here: with bfloat16, cuDNN's tensor-core kernels serve a
// stem as fast (ResNet-50 224x224 channels-last steps). The functions take all three dtypes.
#include <cstddef>

#include "core/dtype.h"
#include "ops/context.h"
#include "ops/conv2d.h"

namespace sublet::ops::cuda {

// The largest column workspace one chunk takes by default.
inline constexpr std::size_t kIm2colColumnBytes = std::size_t{64} << 20;

// Channels-last, groups 1, float32, fewer than 8 input channels, at least 16
// values per column row (a 1x1 kernel on 3 channels is no GEMM worth making) and more than one
// output pixel (one pixel is conv2d_single_tap.h's).
bool conv2d_im2col_applies(const Conv2dShape& s, DType dtype);

// Preconditions: conv2d_im2col_applies(s, DType::Float32) (the shape); dtype float32, bfloat16
// or float16. Outputs are overwritten.
void conv2d_im2col_forward(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input,
                           const void* weight, void* output, std::size_t column_bytes = kIm2colColumnBytes);
void conv2d_im2col_backward_weight(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                   const void* input, void* grad_weight,
                                   std::size_t column_bytes = kIm2colColumnBytes);

}  // namespace sublet::ops::cuda
