// conv2d_with_sums and batch_norm_relu_conv2d: the convolution + batch norm fusion's forward
// (ops/conv_bn_fusion.h) and one node each whose backward runs the convolution's backward
// kernels and, for the batch norm folded into the convolution, recomputes relu(batch_norm(x))
// and runs batch norm + ReLU's backward kernels.
#include <string>

#include "ops/batch_norm.h"
#include "ops/batch_norm_relu.h"
#include "ops/conv2d.h"
#include "ops/conv2d_kernels.h"
#include "ops/conv_bn_fusion.h"
#include "ops/conv_bn_fusion_kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/elementwise_run.h"
#include "runtime/kernel_args.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"
#include "runtime/nn/functional_conv_shape.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

// The convolution's layout: channels-last where the input or weight asks for it and every kernel
// the pass needs has it.
MemoryFormat fused_format(const Tensor& input, const Tensor& weight) {
  return nn::detail::choose_format(input,
                                   {&ops::conv2d_scale_bias_relu_genstats_kernels(),
                                    &ops::conv2d_backward_input_kernels(), &ops::conv2d_backward_weight_kernels()},
                                   weight);
}

ops::Conv2dShape checked_conv_shape(const char* op, const Tensor& input, const Tensor& weight,
                                    const Conv2dFuncOptions& options) {
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  nn::detail::check_like_input(op, input, weight);
  nn::detail::check_rank(op, "input", input, 4, "(N,C,H,W)");
  nn::detail::check_rank(op, "weight", weight, 4, "(OC,C/groups,KH,KW)");
  ops::Conv2dShape s = conv2d_shape(input, weight, options);
  s.format = fused_format(input, weight);
  return s;
}

Tensor channel_vector(const Tensor& like, std::int64_t channels) {
  return Tensor::empty({channels}, like.options().dtype(DType::Float32));
}

// A per-channel float32 vector of the input's device (may be undefined unless `required`).
void check_channel_vector(const char* op, const char* what, const Tensor& input, const Tensor& t,
                          std::int64_t channels, bool required) {
  if (!t.defined()) {
    if (required) throw ValueError(std::string(op) + ": " + what + " is required");
    return;
  }
  sublet::detail::check_same_device(op, input, t);
  if (t.dtype() != DType::Float32 || t.dim() != 1 || t.size(0) != channels || !t.is_contiguous()) {
    throw ShapeError(std::string(op) + ": " + what + " must be a contiguous float32 [" + std::to_string(channels) +
                     "], got " + dtype_name(t.dtype()) + " " + shape_str(t.sizes()));
  }
}

// The convolution's two gradients, one after the other.
void conv_backward(const ops::Conv2dShape& s, const Tensor& grad_out, const Tensor& x, const Tensor& w,
                   Tensor* grad_input, Tensor* grad_weight) {
  const auto ctx = sublet::detail::context_for(grad_out);
  if (grad_input != nullptr) {
    *grad_input = Tensor::empty({s.batch, s.in_channels, s.in_height, s.in_width}, grad_out.options(), s.format);
    ops::conv2d_backward_input(ctx, s, grad_out.dtype(), grad_out.data_ptr(), w.data_ptr(), grad_input->data_ptr());
  }
  if (grad_weight != nullptr) {
    *grad_weight =
        Tensor::empty({s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w}, grad_out.options(), s.format);
    ops::conv2d_backward_weight(ctx, s, grad_out.dtype(), grad_out.data_ptr(), x.data_ptr(), grad_weight->data_ptr(),
                                nullptr);
  }
}

ops::BatchNormShape input_norm_shape(const ops::Conv2dShape& s) {
  ops::BatchNormShape b;
  b.batch = s.batch;
  b.channels = s.in_channels;
  b.height = s.in_height;
  b.width = s.in_width;
  b.format = s.format;
  return b;
}

std::int64_t* batch_counter(const char* op, const Tensor& input, const Tensor& num_batches_tracked) {
  if (!num_batches_tracked.defined()) return nullptr;
  if (num_batches_tracked.dtype() != DType::Int64 || num_batches_tracked.numel() != 1 ||
      num_batches_tracked.device() != input.device()) {
    throw ValueError(std::string(op) + ": num_batches_tracked must be an int64 scalar on the input's device, got " +
                     dtype_name(num_batches_tracked.dtype()) + " " + shape_str(num_batches_tracked.sizes()));
  }
  return static_cast<std::int64_t*>(num_batches_tracked.data_ptr());
}

}  // namespace

Conv2dSums conv2d_with_sums(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options,
                            ops::ConvBnRoute route) {
  const char* op = "conv2d_with_sums";
  if (amp::casts_to_lower({input, weight})) {
    return conv2d_with_sums(amp::to_lower(input), amp::to_lower(weight), options, route);
  }
  const ops::Conv2dShape s = checked_conv_shape(op, input, weight, options);
  const MemoryFormat weight_format = weight.suggest_memory_format();
  Conv2dSums out;
  Tensor x, w;
  {
    NoGradGuard no_grad;
    x = input.contiguous(s.format);
    w = weight.contiguous(s.format);
    out.output = Tensor::empty({s.batch, s.out_channels, s.out_height(), s.out_width()}, input.options(), s.format);
    out.sum = channel_vector(input, s.out_channels);
    out.sqsum = channel_vector(input, s.out_channels);
    ops::conv2d_scale_bias_relu_genstats(sublet::detail::context_for(input), s, input.dtype(), x.data_ptr(), nullptr,
                                         nullptr, w.data_ptr(), out.output.data_ptr(),
                                         static_cast<float*>(out.sum.data_ptr()),
                                         static_cast<float*>(out.sqsum.data_ptr()), route);
  }
  if (autograd::any_requires_grad({input, weight})) {
    const bool need_input = input.requires_grad(), need_weight = weight.requires_grad();
    autograd::record(op, {input, weight}, {out.output},
                     [s, weight_format, need_input, need_weight, x = need_weight ? autograd::save(x) : Tensor(),
                      w = need_input ? autograd::save(w) : Tensor()](const TensorList& grads) {
                       const Tensor grad_out = grads[0].contiguous(s.format);
                       Tensor grad_input, grad_weight;
                       conv_backward(s, grad_out, x, w, need_input ? &grad_input : nullptr,
                                     need_weight ? &grad_weight : nullptr);
                       if (need_weight) grad_weight = grad_weight.contiguous(weight_format);
                       return TensorList{grad_input, grad_weight};
                     });
  }
  return out;
}

Conv2dSums batch_norm_relu_conv2d(const Conv2dSums& input, const Tensor& running_mean, const Tensor& running_var,
                                  const Tensor& bn_weight, const Tensor& bn_bias, double momentum, double eps,
                                  const Tensor& num_batches_tracked, const Tensor& weight,
                                  const Conv2dFuncOptions& options, bool want_sums, ops::ConvBnRoute route) {
  const char* op = "batch_norm_relu_conv2d";
  if (amp::casts_to_lower({input.output, weight})) {
    return batch_norm_relu_conv2d({amp::to_lower(input.output), input.sum, input.sqsum}, running_mean, running_var,
                                  bn_weight, bn_bias, momentum, eps, num_batches_tracked, amp::to_lower(weight),
                                  options, want_sums, route);
  }
  const Tensor& y = input.output;
  const ops::Conv2dShape s = checked_conv_shape(op, y, weight, options);
  const std::int64_t channels = s.in_channels;
  check_channel_vector(op, "input.sum", y, input.sum, channels, true);
  check_channel_vector(op, "input.sqsum", y, input.sqsum, channels, true);
  check_channel_vector(op, "bn_weight", y, bn_weight, channels, false);
  check_channel_vector(op, "bn_bias", y, bn_bias, channels, false);
  check_channel_vector(op, "running_mean", y, running_mean, channels, false);
  check_channel_vector(op, "running_var", y, running_var, channels, false);
  if (running_mean.defined() != running_var.defined()) {
    throw ValueError(std::string(op) + ": running_mean and running_var must be given both or neither");
  }
  const ops::BatchNormShape norm = input_norm_shape(s);
  const MemoryFormat weight_format = weight.suggest_memory_format();
  const auto ctx = sublet::detail::context_for(y);
  Tensor x, w, mean, invstd, scale, shift;
  Conv2dSums out;
  {
    NoGradGuard no_grad;
    mean = channel_vector(y, channels);
    invstd = channel_vector(y, channels);
    scale = channel_vector(y, channels);
    shift = channel_vector(y, channels);
    const auto f = [](const Tensor& t) { return t.defined() ? static_cast<float*>(t.data_ptr()) : nullptr; };
    ops::batch_norm_stats_from_sums(ctx, channels, norm.batch * norm.spatial(), f(input.sum), f(input.sqsum),
                                    f(bn_weight), f(bn_bias), f(running_mean), f(running_var), momentum, eps, f(mean),
                                    f(invstd), f(scale), f(shift), batch_counter(op, y, num_batches_tracked));
    x = y.contiguous(s.format);
    w = weight.contiguous(s.format);
    out.output = Tensor::empty({s.batch, s.out_channels, s.out_height(), s.out_width()}, y.options(), s.format);
    if (want_sums) {
      out.sum = channel_vector(y, s.out_channels);
      out.sqsum = channel_vector(y, s.out_channels);
    }
    ops::conv2d_scale_bias_relu_genstats(ctx, s, y.dtype(), x.data_ptr(), f(scale), f(shift), w.data_ptr(),
                                         out.output.data_ptr(), f(out.sum), f(out.sqsum), route);
  }
  if (autograd::any_requires_grad({y, bn_weight, bn_bias, weight})) {
    const bool need_input = y.requires_grad(), need_weight = weight.requires_grad();
    const bool need_bn_weight = bn_weight.defined() && bn_weight.requires_grad();
    const bool need_bn_bias = bn_bias.defined() && bn_bias.requires_grad();
    autograd::record(
        op, {y, bn_weight, bn_bias, weight}, {out.output},
        [s, norm, weight_format, need_input, need_weight, need_bn_weight, need_bn_bias, x = autograd::save(x),
         w = autograd::save(w), gamma = bn_weight.defined() ? autograd::save(bn_weight) : Tensor(),
         mean = autograd::save(mean), invstd = autograd::save(invstd), scale = autograd::save(scale),
         shift = autograd::save(shift)](const TensorList& grads) {
          const Tensor grad_out = grads[0].contiguous(s.format);
          const auto c = sublet::detail::context_for(grad_out);
          const DType dtype = grad_out.dtype();
          // The activation the forward never stored: relu(x * scale + shift).
          const Tensor activated = Tensor::empty(x.sizes(), x.options(), s.format);
          ops::scale_bias_relu(c, norm, dtype, x.data_ptr(), static_cast<const float*>(scale.data_ptr()),
                               static_cast<const float*>(shift.data_ptr()), activated.data_ptr());
          const bool need_norm = need_input || need_bn_weight || need_bn_bias;
          Tensor grad_activated, grad_weight;
          conv_backward(s, grad_out, activated, w, need_norm ? &grad_activated : nullptr,
                        need_weight ? &grad_weight : nullptr);
          if (need_weight) grad_weight = grad_weight.contiguous(weight_format);
          Tensor grad_input, grad_gamma, grad_beta;
          if (need_norm) {
            if (need_input) grad_input = Tensor::empty(x.sizes(), grad_out.options(), s.format);
            if (need_bn_weight) grad_gamma = Tensor::empty({norm.channels}, mean.options());
            if (need_bn_bias) grad_beta = Tensor::empty({norm.channels}, mean.options());
            if (ops::batch_norm_relu_fused(c, norm, dtype)) {
              ops::batch_norm_relu_backward_training(
                  c, norm, dtype, grad_activated.data_ptr(), activated.data_ptr(), x.data_ptr(),
                  nn::detail::data_or_null(gamma), mean.data_ptr(), invstd.data_ptr(),
                  nn::detail::data_or_null(grad_input), nn::detail::data_or_null(grad_gamma),
                  nn::detail::data_or_null(grad_beta), nullptr);
            } else {
              // The ReLU's mask in place on the convolution's input gradient, then batch norm's backward.
              sublet::detail::run_binary(ops::BinaryOp::ReluBackward, grad_activated,
                                         sublet::detail::in_ref(grad_activated), sublet::detail::in_ref(activated));
              ops::batch_norm_backward_training(c, norm, dtype, grad_activated.data_ptr(), x.data_ptr(),
                                                nn::detail::data_or_null(gamma), mean.data_ptr(), invstd.data_ptr(),
                                                nn::detail::data_or_null(grad_input),
                                                nn::detail::data_or_null(grad_gamma),
                                                nn::detail::data_or_null(grad_beta));
            }
          }
          return TensorList{grad_input, grad_gamma, grad_beta, grad_weight};
        });
  }
  return out;
}

}  // namespace sublet::nn::functional
