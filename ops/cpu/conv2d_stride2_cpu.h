#pragma once
// float32 3x3 convolutions of stride 2 and padding 1 (a ResNet's downsampling convolutions) on the
// AVX-512 register tile of the direct convolution (conv2d_avx512_tiles.h), through the input's
// four phases (even/odd rows x even/odd columns): output pixel (i, j) reads phase (p, q) at
// (i, j) or one row or column before, so each tap is a flat shift on an output-sized grid, as in
// the stride-1 kernel, and no column matrix is built. The input gradient is the same in reverse:
// phase (p, q) of grad_input sums 1, 2 or 4 taps of grad_output shifted by at most one row and
// column, computed per phase and interleaved into grad_input. im2col + GEMM (and col2im's
// scatter for the input gradient) ran these at about half the register tile's rate. The weight
// gradient reads the same phases, on the weight-gradient tile. AVX-512 only: elsewhere
// conv2d_cpu.cpp's im2col path runs.
#include "ops/context.h"
#include "ops/conv2d.h"

namespace sublet::ops::cpu {

// True for 3x3, stride 2, padding 1, no dilation, one group, NCHW, at least 8 input and 8 output
// channels, on a CPU with AVX-512 (cpu_has_avx512()).
bool conv2d_stride2_applies(const Conv2dShape& shape);

// output = conv(input, weight) + bias (bias may be nullptr); needs conv2d_stride2_applies(shape).
void conv2d_forward_stride2(const Context& ctx, const Conv2dShape& shape, const float* input, const float* weight,
                            const float* bias, float* output);

// grad_input (overwritten) of the convolution; needs conv2d_stride2_applies(shape).
void conv2d_backward_input_stride2(const Context& ctx, const Conv2dShape& shape, const float* grad_output,
                                   const float* weight, float* grad_input);

// grad_weight (and grad_bias unless nullptr) overwritten; needs conv2d_stride2_applies(shape). The
// weight-gradient tile (8 gradient rows x 3 taps) over grids of several images; items summed
// per thread in a fixed order and the threads' sums added in thread order (deterministic).
void conv2d_backward_weight_stride2(const Context& ctx, const Conv2dShape& shape, const float* grad_output,
                                    const float* input, float* grad_weight, float* grad_bias);

}  // namespace sublet::ops::cpu
