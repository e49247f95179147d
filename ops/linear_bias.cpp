#include "ops/linear_bias.h"

#include <atomic>
#include <string>

#include "core/errors.h"
#include "ops/linear_bias_kernels.h"

namespace sublet::ops {
namespace {

std::atomic<std::int64_t> fallback_count{0};

}  // namespace

bool has_linear_bias(Device device, DType dtype) { return linear_bias_kernels().has(device.type, dtype); }

bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, void* out, const void* x,
                 const void* w, const void* bias) {
  if (geometry.m < 0 || geometry.k < 0 || geometry.n < 0) {
    throw ShapeError("linear_bias: sizes must not be negative, got m " + std::to_string(geometry.m) + ", k " +
                     std::to_string(geometry.k) + ", n " + std::to_string(geometry.n));
  }
  const bool done = linear_bias_kernels().get("linear_bias", ctx.device, dtype)(ctx, dtype, geometry, out, x, w, bias);
  if (!done) fallback_count.fetch_add(1, std::memory_order_relaxed);
  return done;
}

bool has_linear_weight_grad_float32(Device device, DType dtype) {
  return linear_weight_grad_float32_kernels().has(device.type, dtype);
}

bool linear_weight_grad_float32(const Context& ctx, DType dtype, const LinearBiasGeometry& geometry, float* grad_w,
                                float* grad_bias, const void* grad_out, const void* x) {
  if (geometry.m < 0 || geometry.k < 0 || geometry.n < 0) {
    throw ShapeError("linear_weight_grad_float32: sizes must not be negative, got m " + std::to_string(geometry.m) +
                     ", k " + std::to_string(geometry.k) + ", n " + std::to_string(geometry.n));
  }
  const bool done = linear_weight_grad_float32_kernels().get("linear_weight_grad_float32", ctx.device, dtype)(
      ctx, dtype, geometry, grad_w, grad_bias, grad_out, x);
  if (!done) fallback_count.fetch_add(1, std::memory_order_relaxed);
  return done;
}

std::int64_t linear_bias_fallbacks() { return fallback_count.load(std::memory_order_relaxed); }

}  // namespace sublet::ops
