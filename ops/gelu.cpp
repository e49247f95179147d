#include "ops/gelu.h"

#include <string>

#include "core/errors.h"
#include "ops/gelu_kernels.h"

namespace sublet::ops {

const char* gelu_approximate_name(GeluApproximate approximate) {
  return approximate == GeluApproximate::Tanh ? "tanh" : "none";
}

void gelu_forward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate, const void* input,
                  void* output) {
  if (numel < 0) throw ShapeError("gelu: negative element count " + std::to_string(numel));
  if (numel == 0) return;
  gelu_forward_kernels().get("gelu", ctx.device, dtype)(ctx, dtype, numel, approximate, input, output);
}

void gelu_backward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                   const void* grad_output, const void* input, void* grad_input) {
  if (numel < 0) throw ShapeError("gelu_backward: negative element count " + std::to_string(numel));
  if (numel == 0) return;
  gelu_backward_kernels().get("gelu_backward", ctx.device, dtype)(ctx, dtype, numel, approximate, grad_output, input,
                                                                  grad_input);
}

}  // namespace sublet::ops
