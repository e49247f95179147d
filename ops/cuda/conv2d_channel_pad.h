#pragma once
// 16-bit channels-last convolutions of few input channels (an RGB image's stem: ResNet's 7x7
// stride-2 convolution of 3 channels) run on operands whose channels are zero-padded.
// Why: cuDNN's NHWC tensor-core kernels read channel vectors of 4 or 8 values; with 3 channels
// they fall back to slower kernels (MLPerf's ResNet-50 pads its images to 4 channels for this).
// Zero channels add nothing to any sum, so the padded convolution gives the same output, and its
// weight and input gradients are the unpadded ones followed by the padding channels' values.
//
// How (ops/cuda/conv2d_cuda.cpp): the input [N, H, W, C] is copied into a workspace
// [N, H, W, P] with zeros in channels C..P-1, the weight [K, R, S, C] into [K, R, S, P] the same
// way, and the same cuDNN pass runs on the padded shape. The weight gradient is computed as
// [K, R, S, P] and its first C channels of each row kept; likewise the input gradient (when
// accumulating, the gradient so far is widened first so that cuDNN adds to it and rounds once).
// Every padded buffer is a workspace from the caching allocator, gone when the pass is enqueued:
// backward widens the input (or weight) again rather than keeping a padded copy from forward.
//
// Selected by TuningOptions::conv_pad_channels (core/tuning.h): off, or P = C rounded up to a
// multiple of 4 or 8.
#include <cstdint>

#include "core/dtype.h"
#include "memory/caching_allocator.h"
#include "ops/context.h"
#include "ops/conv2d.h"

namespace sublet::ops::cuda {

// The padded channel count for this convolution under `multiple` (0 = off, 4 or 8): in_channels
// rounded up to a multiple of it. 0 where the padding does not apply: multiple 0; not bfloat16
// or float16; not channels-last; groups other than 1; 8 or more input channels; in_channels
// already a multiple; or a single-tap convolution (ops/cuda/conv2d_single_tap.h: a GEMM already).
std::int64_t conv2d_padded_channels(const Conv2dShape& s, DType dtype, int multiple);

// The same convolution on `channels` input channels.
Conv2dShape conv2d_with_in_channels(Conv2dShape s, std::int64_t channels);

// dst [rows, padded] = src [rows, channels] with zeros after each row's `channels` values, for
// 2-byte elements (bfloat16 and float16 alike: zero is all bits clear in both). padded is 4 or 8;
// the padded buffer (dst here, src below) is aligned to 2 * padded bytes, as every allocation is.
void conv2d_widen_channels(const Context& ctx, std::int64_t rows, std::int64_t channels, std::int64_t padded,
                           const void* src, void* dst);
// dst [rows, channels] = the first `channels` values of each row of src [rows, padded].
void conv2d_narrow_channels(const Context& ctx, std::int64_t rows, std::int64_t padded, std::int64_t channels,
                            const void* src, void* dst);

// A workspace of [rows, padded] 2-byte elements holding src [rows, channels] widened.
memory::ScopedBlock conv2d_widened_copy(const Context& ctx, std::int64_t rows, std::int64_t channels,
                                        std::int64_t padded, const void* src);

}  // namespace sublet::ops::cuda
