#include "ops/conv_bn_fusion.h"

#include <atomic>
#include <string>

#include "core/errors.h"
#include "ops/conv_bn_fusion_kernels.h"

namespace sublet::ops {

namespace {

constexpr const char* kOp = "conv2d_scale_bias_relu_genstats";

struct Counters {
  std::atomic<std::uint64_t> fused{0}, no_engine{0}, backend{0}, requested{0};
};
Counters& counters() {
  static Counters c;
  return c;
}

void check_dtype(const char* op, DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::Float64 && dtype != DType::BFloat16 && dtype != DType::Float16) {
    throw DTypeError(std::string(op) + ": expected floating-point activations, got " + dtype_name(dtype));
  }
}

void check_pair(const char* op, const void* a, const void* b, const char* what) {
  if ((a == nullptr) != (b == nullptr)) {
    throw ValueError(std::string(op) + ": " + what + " must be given both or neither, got one");
  }
}

}  // namespace

bool conv2d_scale_bias_relu_genstats_fused(const Context& ctx, const Conv2dShape& shape, DType dtype, bool prologue,
                                           bool stats) {
  auto* query = conv2d_scale_bias_relu_genstats_fused_kernels().find(ctx.device.type, dtype, shape.format);
  return query != nullptr && query(ctx, shape, dtype, prologue, stats);
}

void conv2d_scale_bias_relu_genstats(const Context& ctx, const Conv2dShape& shape, DType dtype, const void* input,
                                     const float* scale, const float* bias, const void* weight, void* output,
                                     float* sum, float* sqsum, ConvBnRoute route) {
  shape.validate();
  check_dtype(kOp, dtype);
  check_pair(kOp, scale, bias, "scale and bias");
  check_pair(kOp, sum, sqsum, "sum and sqsum");
  const bool has_fused = conv2d_scale_bias_relu_genstats_fused_kernels().find(ctx.device.type, dtype, shape.format);
  const bool fused = conv2d_scale_bias_relu_genstats_kernels().get(kOp, ctx.device, dtype, shape.format)(
      ctx, shape, dtype, input, scale, bias, weight, output, sum, sqsum, route == ConvBnRoute::Fastest);
  Counters& c = counters();
  if (fused) {
    c.fused.fetch_add(1, std::memory_order_relaxed);
  } else if (route == ConvBnRoute::Unfused) {
    c.requested.fetch_add(1, std::memory_order_relaxed);
  } else if (has_fused) {
    c.no_engine.fetch_add(1, std::memory_order_relaxed);
  } else {
    c.backend.fetch_add(1, std::memory_order_relaxed);
  }
}

void scale_bias_relu(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* input,
                     const float* scale, const float* bias, void* output) {
  shape.validate(false);
  check_dtype("scale_bias_relu", dtype);
  if (scale == nullptr || bias == nullptr) throw ValueError("scale_bias_relu: scale and bias are required");
  scale_bias_relu_kernels().get("scale_bias_relu", ctx.device, dtype, shape.format)(ctx, shape, dtype, input, scale,
                                                                                     bias, output);
}

void batch_norm_stats_from_sums(const Context& ctx, std::int64_t channels, std::int64_t count, const float* sum,
                                const float* sqsum, const float* weight, const float* bias, float* running_mean,
                                float* running_var, double momentum, double eps, float* save_mean, float* save_invstd,
                                float* scale, float* shift, std::int64_t* num_batches_tracked) {
  const char* op = "batch_norm_stats_from_sums";
  if (channels <= 0) throw ShapeError(std::string(op) + ": expected at least one channel, got " + std::to_string(channels));
  if (count < 2) {
    throw ShapeError(std::string(op) + ": training needs more than one value per channel, got " +
                     std::to_string(count));
  }
  detail::check_eps(op, eps);
  detail::check_momentum(op, momentum);
  check_pair(op, running_mean, running_var, "running_mean and running_var");
  if (sum == nullptr || sqsum == nullptr || save_mean == nullptr || save_invstd == nullptr || scale == nullptr ||
      shift == nullptr) {
    throw ValueError(std::string(op) + ": sum, sqsum, save_mean, save_invstd, scale and shift are required");
  }
  batch_norm_stats_from_sums_kernels().get(op, ctx.device, DType::Float32)(
      ctx, channels, count, sum, sqsum, weight, bias, running_mean, running_var, momentum, eps, save_mean, save_invstd,
      scale, shift, num_batches_tracked);
}

ConvBnFusionCounts conv_bn_fusion_counts() {
  const Counters& c = counters();
  return {c.fused.load(std::memory_order_relaxed), c.no_engine.load(std::memory_order_relaxed),
          c.backend.load(std::memory_order_relaxed), c.requested.load(std::memory_order_relaxed)};
}

void reset_conv_bn_fusion_counts() {
  Counters& c = counters();
  c.fused = 0;
  c.no_engine = 0;
  c.backend = 0;
  c.requested = 0;
}

}  // namespace sublet::ops
