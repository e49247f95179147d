#include "ops/softmax.h"

#include "ops/softmax_kernels.h"

namespace sublet::ops {

void softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* input, void* output) {
  shape.validate("softmax");
  softmax_forward_kernels().get("softmax", ctx.device, dtype)(ctx, shape, dtype, input, output);
}

void softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_output,
                      const void* output, void* grad_input) {
  shape.validate("softmax_backward");
  softmax_backward_kernels().get("softmax_backward", ctx.device, dtype)(ctx, shape, dtype, grad_output, output,
                                                                        grad_input);
}

}  // namespace sublet::ops
