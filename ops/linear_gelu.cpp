#include "ops/linear_gelu.h"

#include <atomic>
#include <string>

#include "core/errors.h"
#include "ops/linear_gelu_kernels.h"

namespace sublet::ops {
namespace {

std::atomic<std::int64_t> fallback_count{0};

void check_sizes(const char* op, const GeluGemmGeometry& g) {
  if (g.m < 0 || g.k < 0 || g.n < 0) {
    throw ShapeError(std::string(op) + ": sizes must not be negative, got m " + std::to_string(g.m) + ", k " +
                     std::to_string(g.k) + ", n " + std::to_string(g.n));
  }
}

bool counted(bool done) {
  if (!done) fallback_count.fetch_add(1, std::memory_order_relaxed);
  return done;
}

}  // namespace

bool gelu_epilogue_fits(std::int64_t n) { return n > 0 && n % 8 == 0; }

bool has_linear_gelu(Device device, DType dtype) {
  return linear_gelu_forward_kernels().has(device.type, dtype) &&
         linear_gelu_backward_kernels().has(device.type, dtype);
}

bool linear_gelu_forward(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry, void* out, void* pre,
                         const void* x, const void* w, const void* bias) {
  check_sizes("linear_gelu_forward", geometry);
  return counted(linear_gelu_forward_kernels().get("linear_gelu_forward", ctx.device, dtype)(ctx, dtype, geometry,
                                                                                              out, pre, x, w, bias));
}

bool linear_gelu_backward(const Context& ctx, DType dtype, const GeluGemmGeometry& geometry, void* grad_pre,
                          void* grad_bias, const void* grad_out, const void* w, const void* pre) {
  check_sizes("linear_gelu_backward", geometry);
  return counted(linear_gelu_backward_kernels().get("linear_gelu_backward", ctx.device, dtype)(
      ctx, dtype, geometry, grad_pre, grad_bias, grad_out, w, pre));
}

std::int64_t linear_gelu_fallbacks() { return fallback_count.load(std::memory_order_relaxed); }

}  // namespace sublet::ops
