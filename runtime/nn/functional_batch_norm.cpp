// batch_norm: training (batch statistics, running statistics updated in place) and eval
// (running statistics as constants), each with one node over the backward kernels; and
// batch_norm_relu, the same fused with a residual add and a ReLU where the fused kernels apply,
// and otherwise batch norm's kernels with the add and the ReLU in place on its output.
#include "ops/batch_norm.h"
#include "ops/batch_norm_kernels.h"
#include "ops/batch_norm_relu.h"
#include "ops/elementwise.h"
#include "runtime/autograd/function.h"
#include "runtime/elementwise_run.h"
#include "runtime/kernel_args.h"
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

// The dtype of the per-channel tensors (weight, bias, running and saved statistics and their
// gradients): the input's, except that a bfloat16/float16 input keeps them float32 (as PyTorch's
// autocast and cuDNN: statistics and parameters stay float32).
DType parameter_dtype(DType input) {
  return input == DType::BFloat16 || input == DType::Float16 ? DType::Float32 : input;
}

TensorOptions parameter_options(const Tensor& like) { return like.options().dtype(parameter_dtype(like.dtype())); }

// An optional per-channel tensor: check_per_channel, with float32 expected for a 16-bit input.
void check_parameter(const char* what, const Tensor& input, const Tensor& t, std::int64_t channels) {
  const DType expected = parameter_dtype(input.dtype());
  if (!t.defined() || expected == input.dtype()) {
    nn::detail::check_per_channel("batch_norm", what, input, t, channels);
    return;
  }
  sublet::detail::check_same_device("batch_norm", input, t);
  if (t.dtype() != expected) {
    throw DTypeError(std::string("batch_norm: ") + what + " must be " + dtype_name(expected) + " for a " +
                     dtype_name(input.dtype()) + " input (parameters and statistics stay float32), got " +
                     dtype_name(t.dtype()));
  }
  if (t.dim() != 1 || t.size(0) != channels) {
    throw ShapeError(std::string("batch_norm: ") + what + " must be [" + std::to_string(channels) +
                     "] (one per channel), got " + shape_str(t.sizes()));
  }
}

// Running statistics are written by the kernel in place: they must be plain contiguous buffers.
void check_running_stat(const Tensor& input, const Tensor& stat, const char* what, std::int64_t channels) {
  check_parameter(what, input, stat, channels);
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
  ops::BatchNormShape s = norm_shape(input);
  s.validate(training);
  s.format = training ? nn::detail::choose_format(input, {&ops::batch_norm_forward_training_kernels(),
                                                          &ops::batch_norm_backward_training_kernels()})
                      : nn::detail::choose_format(input, {&ops::batch_norm_forward_eval_kernels(),
                                                          &ops::batch_norm_backward_eval_kernels()});
  check_running_stat(input, running_mean, "running_mean", s.channels);
  check_running_stat(input, running_var, "running_var", s.channels);
  check_parameter("weight", input, weight, s.channels);
  check_parameter("bias", input, bias, s.channels);
  if (!training && (!running_mean.defined() || !running_var.defined())) {
    throw ValueError("batch_norm: evaluation needs running_mean and running_var");
  }
  return s;
}

// num_batches_tracked's device pointer for the kernels to increment (training only), after
// checking that it is an int64 scalar on the input's device; nullptr when undefined or not training.
std::int64_t* batch_counter(const char* op, const Tensor& input, const Tensor& num_batches_tracked, bool training) {
  if (!num_batches_tracked.defined() || !training) return nullptr;
  if (num_batches_tracked.dtype() != DType::Int64 || num_batches_tracked.numel() != 1 ||
      num_batches_tracked.device() != input.device()) {
    throw ValueError(std::string(op) + ": num_batches_tracked must be an int64 scalar on the input's device (" +
                     input.device().str() + "), got " + dtype_name(num_batches_tracked.dtype()) + " " +
                     shape_str(num_batches_tracked.sizes()) + " on " + num_batches_tracked.device().str());
  }
  return static_cast<std::int64_t*>(num_batches_tracked.data_ptr());
}

// One fused kernel each way (ops/batch_norm_relu.h); the caller checked that it applies.
Tensor fused_batch_norm_relu(const ops::BatchNormShape& s, const Tensor& input, const Tensor& residual,
                             const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                             const Tensor& bias, double momentum, double eps, std::int64_t* num_batches_tracked) {
  Tensor x, r, w, b, out, mean, invstd;
  {
    NoGradGuard no_grad;
    x = input.contiguous(s.format);
    r = residual.defined() ? residual.contiguous(s.format) : Tensor();
    w = nn::detail::contiguous_or_undefined(weight);
    b = nn::detail::contiguous_or_undefined(bias);
    out = Tensor::empty(input.sizes(), input.options(), s.format);
    mean = Tensor::empty({s.channels}, parameter_options(input));
    invstd = Tensor::empty({s.channels}, parameter_options(input));
    ops::batch_norm_relu_forward_training(sublet::detail::context_for(input), s, input.dtype(), x.data_ptr(),
                                          nn::detail::data_or_null(r), nn::detail::data_or_null(w),
                                          nn::detail::data_or_null(b), nn::detail::data_or_null(running_mean),
                                          nn::detail::data_or_null(running_var), momentum, eps, out.data_ptr(),
                                          mean.data_ptr(), invstd.data_ptr(), num_batches_tracked);
  }
  if (autograd::any_requires_grad({input, weight, bias, residual})) {
    const bool need_input = input.requires_grad();
    const bool need_weight = weight.defined() && weight.requires_grad();
    const bool need_bias = bias.defined() && bias.requires_grad();
    const bool need_residual = residual.defined() && residual.requires_grad();
    // Without a residual the backward may recompute the ReLU's mask from x, which needs the bias.
    const bool has_residual = residual.defined();
    autograd::record(
        "batch_norm_relu", {input, weight, bias, residual}, {out},
        [s, need_input, need_weight, need_bias, need_residual, has_residual, x = autograd::save(x),
         w = w.defined() ? autograd::save(w) : Tensor(), b = b.defined() && !has_residual ? autograd::save(b) : Tensor(),
         mean = autograd::save(mean), invstd = autograd::save(invstd),
         out = autograd::save(out)](const TensorList& grads) {
          const Tensor grad_out = grads[0].contiguous(s.format);
          const Shape sizes = grads[0].sizes();
          Tensor grad_input = need_input ? Tensor::empty(sizes, grad_out.options(), s.format) : Tensor();
          Tensor grad_weight = need_weight ? Tensor::empty({s.channels}, parameter_options(grad_out)) : Tensor();
          Tensor grad_bias = need_bias ? Tensor::empty({s.channels}, parameter_options(grad_out)) : Tensor();
          Tensor grad_residual = need_residual ? Tensor::empty(sizes, grad_out.options(), s.format) : Tensor();
          ops::batch_norm_relu_backward_training(
              sublet::detail::context_for(grad_out), s, grad_out.dtype(), grad_out.data_ptr(), out.data_ptr(),
              x.data_ptr(), nn::detail::data_or_null(w), mean.data_ptr(), invstd.data_ptr(),
              nn::detail::data_or_null(grad_input), nn::detail::data_or_null(grad_weight),
              nn::detail::data_or_null(grad_bias), nn::detail::data_or_null(grad_residual),
              ops::BatchNormReluForwardTerms{nn::detail::data_or_null(b), has_residual});
          return TensorList{grad_input, grad_weight, grad_bias, grad_residual};
        });
  }
  return out;
}

}  // namespace

namespace {

// batch_norm's forward without recording: the output and what its backward needs.
struct NormForward {
  Tensor x, w, out, mean, invstd;  // mean/invstd: batch statistics (training) or running ones (eval)
};

NormForward norm_forward(const ops::BatchNormShape& s, const Tensor& input, const Tensor& running_mean,
                         const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                         double momentum, double eps, std::int64_t* num_batches_tracked) {
  NoGradGuard no_grad;
  NormForward f;
  f.x = input.contiguous(s.format);
  f.w = nn::detail::contiguous_or_undefined(weight);
  const Tensor b = nn::detail::contiguous_or_undefined(bias);
  const auto ctx = sublet::detail::context_for(input);
  f.out = Tensor::empty(input.sizes(), input.options(), s.format);
  if (training) {
    f.mean = Tensor::empty({s.channels}, parameter_options(input));
    f.invstd = Tensor::empty({s.channels}, parameter_options(input));
    ops::batch_norm_forward_training(ctx, s, input.dtype(), f.x.data_ptr(), nn::detail::data_or_null(f.w),
                                     nn::detail::data_or_null(b), nn::detail::data_or_null(running_mean),
                                     nn::detail::data_or_null(running_var), momentum, eps, f.out.data_ptr(),
                                     f.mean.data_ptr(), f.invstd.data_ptr(), num_batches_tracked);
  } else {
    ops::batch_norm_forward_eval(ctx, s, input.dtype(), f.x.data_ptr(), nn::detail::data_or_null(f.w),
                                 nn::detail::data_or_null(b), running_mean.data_ptr(), running_var.data_ptr(), eps,
                                 f.out.data_ptr());
    // Copies: a later training step updates the buffers in place, and backward must see
    // the statistics this forward used.
    f.mean = running_mean.clone();
    f.invstd = running_var.clone();  // the running variance; the eval kernels take eps
  }
  return f;
}

// What batch_norm's node keeps, and its backward: the gradients of input, weight and bias.
struct NormBackward {
  ops::BatchNormShape s;
  bool training = false;
  double eps = 0;
  bool need_input = false, need_weight = false, need_bias = false;
  Tensor x, w, mean, invstd;  // saved (autograd::save)

  NormBackward(const ops::BatchNormShape& shape, const NormForward& f, const Tensor& input, const Tensor& weight,
               const Tensor& bias, bool training_, double eps_)
      : s(shape), training(training_), eps(eps_), need_input(input.requires_grad()),
        need_weight(weight.defined() && weight.requires_grad()), need_bias(bias.defined() && bias.requires_grad()),
        x(autograd::save(f.x)), w(f.w.defined() ? autograd::save(f.w) : Tensor()), mean(autograd::save(f.mean)),
        invstd(autograd::save(f.invstd)) {}

  TensorList operator()(const Tensor& gradient) const {
    const Tensor grad_out = gradient.contiguous(s.format);
    const Shape sizes = gradient.sizes();
    Tensor grad_input = need_input ? Tensor::empty(sizes, grad_out.options(), s.format) : Tensor();
    Tensor grad_weight = need_weight ? Tensor::empty({s.channels}, parameter_options(grad_out)) : Tensor();
    Tensor grad_bias = need_bias ? Tensor::empty({s.channels}, parameter_options(grad_out)) : Tensor();
    const auto ctx = sublet::detail::context_for(grad_out);
    if (training) {
      ops::batch_norm_backward_training(ctx, s, grad_out.dtype(), grad_out.data_ptr(), x.data_ptr(),
                                        nn::detail::data_or_null(w), mean.data_ptr(), invstd.data_ptr(),
                                        nn::detail::data_or_null(grad_input), nn::detail::data_or_null(grad_weight),
                                        nn::detail::data_or_null(grad_bias));
    } else {
      ops::batch_norm_backward_eval(ctx, s, grad_out.dtype(), grad_out.data_ptr(), x.data_ptr(),
                                    nn::detail::data_or_null(w), mean.data_ptr(), invstd.data_ptr(), eps,
                                    nn::detail::data_or_null(grad_input), nn::detail::data_or_null(grad_weight),
                                    nn::detail::data_or_null(grad_bias));
    }
    return TensorList{grad_input, grad_weight, grad_bias};
  }
};

// relu in place on `z` (batch norm's output, the residual added), recorded as relu's own node on
// an alias, so that the forward needs one buffer where relu(y + residual) needs three. Backward
// masks the incoming gradient in place when the node is its only holder (a gradient is
// otherwise never written to): the same values as relu's node, one activation fewer in flight.
Tensor relu_in_place(const Tensor& z) {
  Tensor out = sublet::detail::make_view(z, z.sizes(), z.strides(), z.storage_offset());
  {
    NoGradGuard no_grad;
    sublet::detail::begin_inplace("relu", out);
    sublet::detail::run_unary(ops::UnaryOp::Relu, out, sublet::detail::in_ref(out));
  }
  autograd::record("relu", {z}, {out}, [y = autograd::save(out)](TensorList& grads) {
    Tensor g = std::move(grads[0]);
    const bool exclusive = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 &&
                           g.is_non_overlapping_and_dense() && g.storage_offset() == 0 &&
                           g.storage().nbytes() == g.nbytes();
    Tensor masked = exclusive ? g : sublet::detail::empty_elementwise_output(g.sizes(), g.options(), {&g, &y});
    sublet::detail::run_binary(ops::BinaryOp::ReluBackward, masked, sublet::detail::in_ref(g),
                               sublet::detail::in_ref("relu_backward", y, g.sizes()));
    return TensorList{masked};
  });
  return out;
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps, const Tensor& num_batches_tracked) {
  const ops::BatchNormShape s = checked_shape(input, running_mean, running_var, weight, bias, training);
  std::int64_t* counter = batch_counter("batch_norm", input, num_batches_tracked, training);
  NormForward f = norm_forward(s, input, running_mean, running_var, weight, bias, training, momentum, eps, counter);
  if (autograd::any_requires_grad({input, weight, bias})) {
    autograd::record("batch_norm", {input, weight, bias}, {f.out},
                     [backward = NormBackward(s, f, input, weight, bias, training, eps)](const TensorList& grads) {
                       return backward(grads[0]);
                     });
  }
  return f.out;
}

Tensor batch_norm_relu(const Tensor& input, const Tensor& residual, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                       double momentum, double eps, const Tensor& num_batches_tracked) {
  const ops::BatchNormShape s = checked_shape(input, running_mean, running_var, weight, bias, training);
  std::int64_t* counter = batch_counter("batch_norm_relu", input, num_batches_tracked, training);
  if (residual.defined()) {
    nn::detail::check_like_input("batch_norm_relu", input, residual);
    if (residual.sizes() != input.sizes()) {
      throw ShapeError("batch_norm_relu: residual must have the input's shape " + shape_str(input.sizes()) + ", got " +
                       shape_str(residual.sizes()));
    }
  }
  if (training && ops::batch_norm_relu_fused(sublet::detail::context_for(input), s, input.dtype())) {
    return fused_batch_norm_relu(s, input, residual, running_mean, running_var, weight, bias, momentum, eps, counter);
  }
  // Batch norm's kernel, the residual added in place on its output (one node for both: the
  // residual's gradient is the output's), then relu in place: relu(batch_norm(x) + residual)
  // value for value, with the gradients of the three nodes it replaces.
  NormForward f = norm_forward(s, input, running_mean, running_var, weight, bias, training, momentum, eps, counter);
  if (residual.defined()) {
    NoGradGuard no_grad;
    f.out.add_(residual);
  }
  if (autograd::any_requires_grad({input, weight, bias, residual})) {
    const bool need_residual = residual.defined() && residual.requires_grad();
    autograd::record(residual.defined() ? "batch_norm_add" : "batch_norm", {input, weight, bias, residual}, {f.out},
                     [backward = NormBackward(s, f, input, weight, bias, training, eps),
                      need_residual](const TensorList& grads) {
                       TensorList out = backward(grads[0]);
                       out.push_back(need_residual ? grads[0] : Tensor());
                       return out;
                     });
  }
  return relu_in_place(f.out);
}

}  // namespace sublet::nn::functional
