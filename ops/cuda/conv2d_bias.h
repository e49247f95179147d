#pragma once
// conv2d's bias terms on the GPU where cuDNN's cudnnAddTensor / cudnnConvolutionBackwardBias are
// not used: 16-bit dtypes (loaded as float32, summed in float32, stored once in 16 bits) and
// channels-last outputs (C fastest). float32/float64 NCHW keep the cuDNN calls. The layout is
// shape.format (ops/conv2d.h); bias and grad_bias are [OC] vectors of the call's dtype.
#include "ops/conv2d.h"

namespace sublet::ops::cuda {

// output[n, c, h, w] += bias[c], in place, enqueued on ctx.stream.
void conv2d_bias_add(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* bias, void* output);

// grad_bias[c] = sum over n, h, w of grad_output[n, c, h, w] (overwritten). A fixed-order two-pass
// reduction (per-chunk partial sums in a ctx.workspace() buffer, then one sum per channel), so
// repeated runs give the same bits.
void conv2d_bias_grad(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* grad_output,
                      void* grad_bias);

}  // namespace sublet::ops::cuda
