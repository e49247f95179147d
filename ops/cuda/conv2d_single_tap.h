#pragma once
// Convolutions in which one kernel tap meets the whole input: the output is a single pixel and
// only one tap of the kernel lands inside the input. A 3x3 padding-1 convolution on a 1x1 plane
// (ResNet-18/34's last stage on 32x32 images) and a 1x1 stride-2 convolution that keeps one
// pixel of a 2x2 plane are such products of matrices, [N, C] x [C, K], where cuDNN's implicit
// GEMM engines still walk every tap, in a handful of thread blocks. These run as one cuBLAS GEMM
// each (float32 accumulation; float32 inputs as TF32 when conv_algorithm_settings().allow_tf32,
// as cuDNN's).
//
// Serves channels-last shapes of float32, bfloat16 and float16 with groups 1 (in NCHW a tap's
// weights are not a matrix cuBLAS can read, except for a 1x1 kernel on a 1x1 plane). The bias
// terms stay with the caller.
#include "ops/context.h"
#include "ops/conv2d.h"
#include "core/dtype.h"

namespace sublet::ops::cuda {

bool conv2d_single_tap_applies(const Conv2dShape& s, DType dtype);

// Preconditions: conv2d_single_tap_applies(s, dtype). Outputs are overwritten (the weight
// gradient's other taps and the input gradient's other pixels with zeros), except the input
// gradient with `accumulate`: the pass is added to it (GEMM beta = 1, other pixels kept).
void conv2d_single_tap_forward(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input,
                               const void* weight, void* output);
void conv2d_single_tap_backward_input(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                      const void* weight, void* grad_input, bool accumulate = false);
void conv2d_single_tap_backward_weight(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                       const void* input, void* grad_weight);

}  // namespace sublet::ops::cuda
