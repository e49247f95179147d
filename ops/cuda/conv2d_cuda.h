#pragma once
// cuDNN behind ops/conv2d.h (same arguments, device pointers; the shape is already validated).
#include "ops/conv2d.h"

namespace sublet::ops::cuda {

void conv2d_forward(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input, const void* weight,
                    const void* bias, void* output);
bool conv2d_backward_input_accumulate(const Context& ctx, const Conv2dShape& shape, DType dtype,
                                      const void* grad_output, const void* weight, void* grad_input);
void conv2d_backward_input(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* grad_output,
                           const void* weight, void* grad_input);
void conv2d_backward_weight(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* grad_output,
                            const void* input, void* grad_weight, void* grad_bias);

}  // namespace sublet::ops::cuda
