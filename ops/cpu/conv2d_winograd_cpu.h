#pragma once
// float32 Winograd F(2x2, 3x3) convolution for 3x3 kernels, stride 1, padding 1 (ResNet's
// convolutions, and through conv2d_cpu.cpp's flipped weight their input gradients): each 2x2
// block of output pixels comes from a 4x4 block of input through 16 products per channel pair
// instead of 36, 2.25x fewer multiplies. The 16 products of a channel pair are 16 GEMMs
// [OC x C] x [C x tiles], run on the AVX-512 register tile of the direct convolution
// (conv2d_avx512_tiles.h); the input and output transforms are additions only (the weight's
// carries the halves of G). So it runs only where cpu_has_avx512() is true; elsewhere the
// direct kernels run. Against the direct convolution, F(2x2, 3x3) adds a few float32 roundings
// per output (the transforms' coefficients are 1 and 1/2, exact in binary).
#include "ops/context.h"
#include "ops/conv2d.h"

namespace sublet::ops::cpu {

// True when the shape suits the kernel (3x3, stride 1, padding 1, no dilation, one group, NCHW,
// at least 32 input and 32 output channels: with 16, the transforms cost more than the GEMMs
// save) and the CPU has AVX-512, unless set_winograd_allowed(false).
bool conv2d_winograd_applies(const Conv2dShape& shape);

// output = conv(input, weight) + bias (bias may be nullptr); needs conv2d_winograd_applies(shape).
void conv2d_forward_winograd(const Context& ctx, const Conv2dShape& shape, const float* input,
                             const float* weight, const float* bias, float* output);

// True when conv2d_backward_weight_winograd handles the shape: as conv2d_winograd_applies, but
// from 16 input and output channels, and for planes of at least 100 pixels.
bool conv2d_winograd_weight_gradient_applies(const Conv2dShape& shape);

// grad_weight (and grad_bias unless nullptr) overwritten; needs
// conv2d_winograd_weight_gradient_applies(shape). Items of images are summed per thread in a fixed
// order and the threads' sums added in thread order, so the result does not depend on scheduling.
void conv2d_backward_weight_winograd(const Context& ctx, const Conv2dShape& shape, const float* grad_output,
                                     const float* input, float* grad_weight, float* grad_bias);

// Tests and benchmarks: false makes both applies() false (the direct kernels run),
// true gives back the default.
void set_winograd_allowed(bool allowed);

}  // namespace sublet::ops::cpu
