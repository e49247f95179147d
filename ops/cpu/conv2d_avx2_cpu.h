#pragma once
// Direct float32 convolution for stride 1 with the output as wide as the input (ResNet's 3x3
// convolutions, and through a flipped weight their input gradients): an AVX2/FMA register
// tile of 24 output pixels x 4 output channels reads the input planes in place, so there is no
// column matrix and no GEMM packing (im2col and Eigen's packing cost about as much as the GEMM
// itself at these channel counts). Small images (7x7) keep the im2col route: a tile of 24
// pixels would be mostly padding there. On a CPU with AVX-512 the forward runs the AVX-512 tile
// (48 pixels x 8 channels, ops/cpu/conv2d_avx512_tiles.h) instead, chosen at run time, and the
// weight gradient its AVX-512 tile (8 gradient rows x 3 taps) where the input has 8 or more
// channels per group (conv2d_cpu.cpp: below that im2col + the AVX-512 GEMM win).
#include "ops/context.h"
#include "ops/conv2d.h"

namespace sublet::ops::cpu {

// True when this build has the kernel (AVX2 and FMA) and the shape suits it.
bool conv2d_avx2_applies(const Conv2dShape& shape);

// output = conv(input, weight) + bias (bias may be nullptr); needs conv2d_avx2_applies(shape).
void conv2d_forward_avx2(const Context& ctx, const Conv2dShape& shape, const float* input,
                           const float* weight, const float* bias, float* output);

// True when conv2d_backward_weight_avx2 handles the shape (larger images than the forward).
bool conv2d_avx2_weight_gradient_applies(const Conv2dShape& shape);

// grad_weight (and grad_bias unless nullptr) overwritten; needs
// conv2d_avx2_weight_gradient_applies(shape).
// Images are summed per thread in a fixed order and the threads' sums added in thread order,
// so the result does not depend on scheduling.
void conv2d_backward_weight_avx2(const Context& ctx, const Conv2dShape& shape,
                                   const float* grad_output, const float* input, float* grad_weight,
                                   float* grad_bias);

}  // namespace sublet::ops::cpu
