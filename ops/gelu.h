#pragma once
// GELU over `numel` contiguous elements, as torch.nn.functional.gelu:
//   None: x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2)))
//   Tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (GPT-2's approximation)
// 16-bit elements are computed in float32.
#include <cstdint>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

enum class GeluApproximate { None, Tanh };

const char* gelu_approximate_name(GeluApproximate approximate);  // "none", "tanh"

void gelu_forward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate, const void* input,
                  void* output);
// grad_input = grad_output * gelu'(input); grad_input may alias grad_output.
void gelu_backward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                   const void* grad_output, const void* input, void* grad_input);

}  // namespace sublet::ops
