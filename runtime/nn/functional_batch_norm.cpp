// batch_norm: training (batch statistics, running statistics updated in place) and eval
// (running statistics as constants), each with one node over the backward kernels; and
// batch_norm_relu, the same fused with a residual add and a ReLU where the fused kernels apply.
#include "ops/batch_norm.h"
#include "ops/batch_norm_relu.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

ops::BatchNormShape norm_shape(const Tensor& input) {
  if (input.dim() != 2 && input.dim() != 4) {
    throw ShapeError("batch_norm: input must be 2-D (N,C) or 4-D (N,C,H,W), got " + shape_str(input.sizes()));
  }
  ops::BatchNormShape s;
  s.batch = input.size(0);
  s.channels = input.size(1);
  s.height = input.dim() == 4 ? input.size(2) : 1;
  s.width = input.dim() == 4 ? input.size(3) : 1;
  return s;
}

// Running statistics are written by the kernel in place: they must be plain contiguous buffers.
void check_running_stat(const Tensor& input, const Tensor& stat, const char* what, std::int64_t channels) {
  nn::detail::check_per_channel("batch_norm", what, input, stat, channels);
  if (!stat.defined()) return;
  if (!stat.is_contiguous()) {
    throw ValueError(std::string("batch_norm: ") + what + " must be contiguous (it is updated in place)");
  }
  if (stat.requires_grad()) {
    throw ValueError(std::string("batch_norm: ") + what + " is a buffer and must not require grad");
  }
}

// The checks batch_norm and batch_norm_relu share; returns the input's shape.
ops::BatchNormShape checked_shape(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                                  const Tensor& weight, const Tensor& bias, bool training) {
  const char* op = "batch_norm";
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  const ops::BatchNormShape s = norm_shape(input);
  s.validate(training);
  check_running_stat(input, running_mean, "running_mean", s.channels);
  check_running_stat(input, running_var, "running_var", s.channels);
  nn::detail::check_per_channel(op, "weight", input, weight, s.channels);
  nn::detail::check_per_channel(op, "bias", input, bias, s.channels);
  if (!training && (!running_mean.defined() || !running_var.defined())) {
    throw ValueError("batch_norm: evaluation needs running_mean and running_var");
  }
  return s;
}

// One fused kernel each way (ops/batch_norm_relu.h); the caller checked that it applies.
Tensor fused_batch_norm_relu(const ops::BatchNormShape& s, const Tensor& input, const Tensor& residual,
                             const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                             const Tensor& bias, double momentum, double eps) {
  Tensor x, r, w, out, mean, invstd;
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    r = nn::detail::contiguous_or_undefined(residual);
    w = nn::detail::contiguous_or_undefined(weight);
    const Tensor b = nn::detail::contiguous_or_undefined(bias);
    out = Tensor::empty(input.sizes(), input.options());
    mean = Tensor::empty({s.channels}, input.options());
    invstd = Tensor::empty({s.channels}, input.options());
    ops::batch_norm_relu_forward_training(sublet::detail::context_for(input), s, input.dtype(), x.data_ptr(),
                                          nn::detail::data_or_null(r), nn::detail::data_or_null(w),
                                          nn::detail::data_or_null(b), nn::detail::data_or_null(running_mean),
                                          nn::detail::data_or_null(running_var), momentum, eps, out.data_ptr(),
                                          mean.data_ptr(), invstd.data_ptr());
  }
  if (autograd::any_requires_grad({input, weight, bias, residual})) {
    const bool need_input = input.requires_grad();
    const bool need_weight = weight.defined() && weight.requires_grad();
    const bool need_bias = bias.defined() && bias.requires_grad();
    const bool need_residual = residual.defined() && residual.requires_grad();
    autograd::record(
        "batch_norm_relu", {input, weight, bias, residual}, {out},
        [s, need_input, need_weight, need_bias, need_residual, x = autograd::save(x),
         w = w.defined() ? autograd::save(w) : Tensor(), mean = autograd::save(mean), invstd = autograd::save(invstd),
         out = autograd::save(out)](const TensorList& grads) {
          const Tensor grad_out = grads[0].contiguous();
          const Shape sizes = grads[0].sizes();
          Tensor grad_input = need_input ? Tensor::empty(sizes, grad_out.options()) : Tensor();
          Tensor grad_weight = need_weight ? Tensor::empty({s.channels}, grad_out.options()) : Tensor();
          Tensor grad_bias = need_bias ? Tensor::empty({s.channels}, grad_out.options()) : Tensor();
          Tensor grad_residual = need_residual ? Tensor::empty(sizes, grad_out.options()) : Tensor();
          ops::batch_norm_relu_backward_training(
              sublet::detail::context_for(grad_out), s, grad_out.dtype(), grad_out.data_ptr(), out.data_ptr(),
              x.data_ptr(), nn::detail::data_or_null(w), mean.data_ptr(), invstd.data_ptr(),
              nn::detail::data_or_null(grad_input), nn::detail::data_or_null(grad_weight),
              nn::detail::data_or_null(grad_bias), nn::detail::data_or_null(grad_residual));
          return TensorList{grad_input, grad_weight, grad_bias, grad_residual};
        });
  }
  return out;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  const ops::BatchNormShape s = checked_shape(input, running_mean, running_var, weight, bias, training);

  Tensor x, w, out, mean, invstd;  // mean/invstd: batch statistics (training) or running ones (eval)
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    w = nn::detail::contiguous_or_undefined(weight);
    const Tensor b = nn::detail::contiguous_or_undefined(bias);
    const auto ctx = sublet::detail::context_for(input);
    out = Tensor::empty(input.sizes(), input.options());
    if (training) {
      mean = Tensor::empty({s.channels}, input.options());
      invstd = Tensor::empty({s.channels}, input.options());
      ops::batch_norm_forward_training(ctx, s, input.dtype(), x.data_ptr(), nn::detail::data_or_null(w),
                                       nn::detail::data_or_null(b), nn::detail::data_or_null(running_mean),
                                       nn::detail::data_or_null(running_var), momentum, eps, out.data_ptr(),
                                       mean.data_ptr(), invstd.data_ptr());
    } else {
      ops::batch_norm_forward_eval(ctx, s, input.dtype(), x.data_ptr(), nn::detail::data_or_null(w),
                                   nn::detail::data_or_null(b), running_mean.data_ptr(), running_var.data_ptr(), eps,
                                   out.data_ptr());
      // Copies: a later training step updates the buffers in place, and backward must see
      // the statistics this forward used.
      mean = running_mean.clone();
      invstd = running_var.clone();  // the running variance; the eval kernels take eps
    }
  }
  if (autograd::any_requires_grad({input, weight, bias})) {
    const bool need_input = input.requires_grad();
    const bool need_weight = weight.defined() && weight.requires_grad();
    const bool need_bias = bias.defined() && bias.requires_grad();
    autograd::record(
        op, {input, weight, bias}, {out},
        [s, training, eps, need_input, need_weight, need_bias, x = autograd::save(x),
         w = w.defined() ? autograd::save(w) : Tensor(), mean = autograd::save(mean),
         invstd = autograd::save(invstd)](const TensorList& grads) {
          const Tensor grad_out = grads[0].contiguous();
          const Shape sizes = grads[0].sizes();
          Tensor grad_input = need_input ? Tensor::empty(sizes, grad_out.options()) : Tensor();
          Tensor grad_weight = need_weight ? Tensor::empty({s.channels}, grad_out.options()) : Tensor();
          Tensor grad_bias = need_bias ? Tensor::empty({s.channels}, grad_out.options()) : Tensor();
          const auto ctx = sublet::detail::context_for(grad_out);
          if (training) {
            ops::batch_norm_backward_training(ctx, s, grad_out.dtype(), grad_out.data_ptr(), x.data_ptr(),
                                              nn::detail::data_or_null(w), mean.data_ptr(), invstd.data_ptr(),
                                              nn::detail::data_or_null(grad_input),
                                              nn::detail::data_or_null(grad_weight),
                                              nn::detail::data_or_null(grad_bias));
          } else {
            ops::batch_norm_backward_eval(ctx, s, grad_out.dtype(), grad_out.data_ptr(), x.data_ptr(),
                                          nn::detail::data_or_null(w), mean.data_ptr(), invstd.data_ptr(), eps,
                                          nn::detail::data_or_null(grad_input),
                                          nn::detail::data_or_null(grad_weight),
                                          nn::detail::data_or_null(grad_bias));
          }
          return TensorList{grad_input, grad_weight, grad_bias};
        });
  }
  return out;
}

Tensor batch_norm_relu(const Tensor& input, const Tensor& residual, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                       double momentum, double eps) {
  const ops::BatchNormShape s = checked_shape(input, running_mean, running_var, weight, bias, training);
  if (residual.defined()) {
    nn::detail::check_like_input("batch_norm_relu", input, residual);
    if (residual.sizes() != input.sizes()) {
      throw ShapeError("batch_norm_relu: residual must have the input's shape " + shape_str(input.sizes()) + ", got " +
                       shape_str(residual.sizes()));
    }
  }
  if (training && ops::batch_norm_relu_fused(sublet::detail::context_for(input), s, input.dtype())) {
    return fused_batch_norm_relu(s, input, residual, running_mean, running_var, weight, bias, momentum, eps);
  }
  Tensor y = batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps);
  if (residual.defined()) y = y + residual;
  return y.relu();
}

}  // namespace sublet::nn::functional
