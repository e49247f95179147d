// nll_loss and the fused cross_entropy over the loss kernels, one node each (log_softmax is in
// functional_softmax.cpp).
#include "ops/accumulate_dtype.h"
#include "ops/loss.h"
#include "ops/loss_kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

ops::ClassScoresShape scores_shape(const char* op, const Tensor& scores, const Tensor& targets) {
  sublet::detail::check_defined(op, scores);
  sublet::detail::check_floating(op, scores);
  nn::detail::check_rank(op, "input", scores, 2, "(N,C)");
  nn::detail::check_targets(op, scores, targets);
  const ops::ClassScoresShape s{scores.size(0), scores.size(1)};
  s.validate(op);
  return s;
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets) {
  const char* op = "nll_loss";
  if (amp::casts_to_float32({log_probs})) return nll_loss(amp::to_float32(log_probs), targets);
  const ops::ClassScoresShape s = scores_shape(op, log_probs, targets);
  Tensor loss, labels;
  {
    NoGradGuard no_grad;
    const Tensor x = log_probs.contiguous();
    labels = targets.contiguous();
    loss = Tensor::empty({}, log_probs.options());
    ops::nll_loss_forward(sublet::detail::context_for(loss), s, log_probs.dtype(), x.data_ptr(),
                          labels.data<std::int64_t>(), loss.data_ptr());
  }
  if (autograd::any_requires_grad({log_probs})) {
    autograd::record(op, {log_probs}, {loss}, [s, labels = autograd::save(labels)](const TensorList& grads) {
      const Tensor grad_loss = grads[0].contiguous();
      Tensor grad_input = Tensor::empty({s.batch, s.classes}, grad_loss.options());
      ops::nll_loss_backward(sublet::detail::context_for(grad_loss), s, grad_loss.dtype(), grad_loss.data_ptr(),
                             labels.data<std::int64_t>(), grad_input.data_ptr());
      return TensorList{grad_input};
    });
  }
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyFuncOptions& options) {
  const char* op = "cross_entropy";
  sublet::detail::check_defined(op, logits);
  // No autocast cast: the CUDA kernels read 16-bit logits as they are and accumulate in float32.
  // A device without 16-bit kernels (the CPU) gets a float32 copy instead.
  const bool sixteen_bit = logits.dtype() == DType::BFloat16 || logits.dtype() == DType::Float16;
  if (sixteen_bit && !ops::cross_entropy_forward_kernels().has(logits.device().type, logits.dtype())) {
    return cross_entropy(logits.to(DType::Float32), targets, options);
  }
  sublet::detail::check_floating(op, logits);
  sublet::detail::check_defined(op, targets);
  sublet::detail::check_same_device(op, logits, targets);
  if (targets.dtype() != DType::Int64) {
    throw DTypeError(std::string(op) + ": targets must be int64 class indices, got " + dtype_name(targets.dtype()));
  }
  if (logits.dim() < 2) {
    throw ShapeError(std::string(op) + ": logits must be [N, C] or [..., C] (classes last), got " +
                     shape_str(logits.sizes()));
  }
  const Shape rows_shape(logits.sizes().begin(), logits.sizes().end() - 1);
  if (targets.sizes() != rows_shape) {
    throw ShapeError(std::string(op) + ": targets must be " + shape_str(rows_shape) + " for logits " +
                     shape_str(logits.sizes()) + ", got " + shape_str(targets.sizes()));
  }
  const std::int64_t classes = logits.size(-1);
  const ops::ClassScoresShape s{classes == 0 ? 0 : logits.numel() / classes, classes};
  s.validate(op);
  const ops::CrossEntropyParams params{options.label_smoothing(), options.ignore_index()};
  const DType acc = ops::accumulate_dtype(logits.dtype());
  Tensor loss, x, labels, lse;
  {
    NoGradGuard no_grad;
    x = logits.contiguous();
    labels = targets.contiguous();
    loss = Tensor::empty({}, logits.options().dtype(acc));
    lse = Tensor::empty({s.batch}, logits.options().dtype(acc));
    ops::cross_entropy_forward(sublet::detail::context_for(loss), s, logits.dtype(), x.data_ptr(),
                               labels.data<std::int64_t>(), params, loss.data_ptr(), lse.data_ptr());
  }
  if (autograd::any_requires_grad({logits})) {
    // The logits are saved (the softmax is recomputed from them and the row log-sum-exp in one
    // pass), not a float32 softmax: no second full-size buffer lives until backward.
    autograd::record(op, {logits}, {loss},
                     [s, params, sizes = logits.sizes(), x = autograd::save(x), labels = autograd::save(labels),
                      lse = autograd::save(lse)](const TensorList& grads) {
                       const Tensor grad_loss = grads[0].contiguous();
                       Tensor grad_logits = Tensor::empty(sizes, x.options());
                       ops::cross_entropy_backward(sublet::detail::context_for(grad_logits), s, x.dtype(),
                                                   grad_loss.data_ptr(), x.data_ptr(), labels.data<std::int64_t>(),
                                                   lse.data_ptr(), params, grad_logits.data_ptr());
                       return TensorList{grad_logits};
                     });
  }
  return loss;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double label_smoothing) {
  return cross_entropy(logits, targets, CrossEntropyFuncOptions().label_smoothing(label_smoothing));
}

}  // namespace sublet::nn::functional
