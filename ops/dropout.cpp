#include "ops/dropout.h"

#include <string>

#include "core/errors.h"
#include "ops/dropout_kernels.h"

namespace sublet::ops {

namespace {

void check_arguments(std::int64_t numel, double p) {
  if (numel < 0) throw ShapeError("dropout: numel must be >= 0, got " + std::to_string(numel));
  if (!(p >= 0 && p <= 1)) throw ValueError("dropout: p must be in [0, 1], got " + std::to_string(p));
}

}  // namespace

void dropout_forward(const Context& ctx, std::int64_t numel, DType dtype, const void* input,
                     double p, std::uint64_t seed, std::uint64_t offset, void* output) {
  check_arguments(numel, p);
  dropout_kernels().get("dropout", ctx.device, dtype)(ctx, numel, dtype, input, p, seed, offset, output);
}

// The gradient of a masked scaling is the same masked scaling.
void dropout_backward(const Context& ctx, std::int64_t numel, DType dtype, const void* grad_output,
                      double p, std::uint64_t seed, std::uint64_t offset, void* grad_input) {
  check_arguments(numel, p);
  dropout_kernels().get("dropout", ctx.device, dtype)(ctx, numel, dtype, grad_output, p, seed, offset, grad_input);
}

}  // namespace sublet::ops
