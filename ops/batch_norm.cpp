#include "ops/batch_norm.h"

#include <string>

#include "core/errors.h"
#include "ops/batch_norm_kernels.h"
#include "ops/elementwise.h"

namespace sublet::ops {

namespace detail {

void check_eps(const char* op, double eps) {
  if (!(eps > 0)) throw ValueError(std::string(op) + ": eps must be > 0, got " + std::to_string(eps));
}

void check_momentum(const char* op, double momentum) {
  if (!(momentum >= 0 && momentum <= 1)) {
    throw ValueError(std::string(op) + ": momentum must be in [0, 1], got " + std::to_string(momentum));
  }
}

void count_batch_apart(const Context& ctx, std::int64_t* num_batches_tracked) {
  const Shape scalar{1};
  unary(ctx, UnaryOp::AddScalar, DType::Int64, scalar, {num_batches_tracked, {1}}, {num_batches_tracked, {1}},
        {1.0});
}

}  // namespace detail

void BatchNormShape::validate(bool training) const {
  if (batch < 1 || channels < 1 || height < 1 || width < 1) {
    throw ShapeError("batch_norm: input must be non-empty (N,C,H,W), got [" +
                     std::to_string(batch) + ", " + std::to_string(channels) + ", " +
                     std::to_string(height) + ", " + std::to_string(width) + "]");
  }
  if (training && batch * height * width < 2) {
    throw ShapeError("batch_norm: training needs more than 1 value per channel, got input [" +
                     std::to_string(batch) + ", " + std::to_string(channels) + ", " +
                     std::to_string(height) + ", " + std::to_string(width) + "]");
  }
}

void batch_norm_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                 const void* input, const void* weight, const void* bias,
                                 void* running_mean, void* running_var, double momentum,
                                 double eps, void* output, void* save_mean, void* save_invstd,
                                 std::int64_t* num_batches_tracked) {
  shape.validate(true);
  detail::check_eps("batch_norm", eps);
  detail::check_momentum("batch_norm", momentum);
  if (num_batches_tracked != nullptr) {
    if (auto* counting = batch_norm_forward_training_counting_kernels().find(ctx.device.type, dtype, shape.format)) {
      counting(ctx, shape, dtype, input, weight, bias, running_mean, running_var, momentum, eps, output, save_mean,
               save_invstd, num_batches_tracked);
      return;
    }
  }
  batch_norm_forward_training_kernels().get("batch_norm", ctx.device, dtype, shape.format)(
      ctx, shape, dtype, input, weight, bias, running_mean, running_var, momentum, eps, output, save_mean,
      save_invstd);
  if (num_batches_tracked != nullptr) detail::count_batch_apart(ctx, num_batches_tracked);
}

void batch_norm_forward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                             const void* input, const void* weight, const void* bias,
                             const void* running_mean, const void* running_var, double eps,
                             void* output) {
  shape.validate(false);
  detail::check_eps("batch_norm", eps);
  batch_norm_forward_eval_kernels().get("batch_norm", ctx.device, dtype, shape.format)(ctx, shape, dtype, input, weight, bias,
                                                                         running_mean, running_var, eps, output);
}

void batch_norm_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                  const void* grad_output, const void* input, const void* weight,
                                  const void* save_mean, const void* save_invstd,
                                  void* grad_input, void* grad_weight, void* grad_bias) {
  shape.validate(true);
  batch_norm_backward_training_kernels().get("batch_norm", ctx.device, dtype, shape.format)(
      ctx, shape, dtype, grad_output, input, weight, save_mean, save_invstd, grad_input, grad_weight, grad_bias);
}

void batch_norm_backward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                              const void* grad_output, const void* input, const void* weight,
                              const void* running_mean, const void* running_var, double eps,
                              void* grad_input, void* grad_weight, void* grad_bias) {
  shape.validate(false);
  detail::check_eps("batch_norm", eps);
  batch_norm_backward_eval_kernels().get("batch_norm", ctx.device, dtype, shape.format)(
      ctx, shape, dtype, grad_output, input, weight, running_mean, running_var, eps, grad_input, grad_weight,
      grad_bias);
}

}  // namespace sublet::ops
