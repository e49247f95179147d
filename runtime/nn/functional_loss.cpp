// log_softmax, nll_loss and the fused cross_entropy over the loss kernels, one node each.
#include "ops/loss.h"
#include "runtime/amp/autocast.h"
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

Tensor log_softmax(const Tensor& input, std::int64_t dim) {
  const char* op = "log_softmax";
  if (amp::casts_to_float32({input})) return log_softmax(amp::to_float32(input), dim);
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  if (input.dim() == 0 || wrap_dim(op, dim, input.sizes()) != input.dim() - 1) {
    throw ValueError("log_softmax: only the last dimension is supported, got dim " + std::to_string(dim) +
                     " of shape " + shape_str(input.sizes()));
  }
  const std::int64_t classes = input.size(input.dim() - 1);
  const ops::ClassScoresShape s{classes == 0 ? 0 : input.numel() / classes, classes};
  s.validate(op);
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor x = input.contiguous();
    out = Tensor::empty(input.sizes(), input.options());
    ops::log_softmax_forward(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(), out.data_ptr());
  }
  if (autograd::any_requires_grad({input})) {
    autograd::record(op, {input}, {out}, [s, out = autograd::save(out)](const TensorList& grads) {
      const Tensor grad_out = grads[0].contiguous();
      Tensor grad_input = Tensor::empty(grads[0].sizes(), grad_out.options());
      ops::log_softmax_backward(sublet::detail::context_for(grad_out), s, grad_out.dtype(), grad_out.data_ptr(),
                                out.data_ptr(), grad_input.data_ptr());
      return TensorList{grad_input};
    });
  }
  return out;
}

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

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double label_smoothing) {
  const char* op = "cross_entropy";
  if (amp::casts_to_float32({logits})) return cross_entropy(amp::to_float32(logits), targets, label_smoothing);
  const ops::ClassScoresShape s = scores_shape(op, logits, targets);
  Tensor loss, x, labels;
  {
    NoGradGuard no_grad;
    x = logits.contiguous();
    labels = targets.contiguous();
    loss = Tensor::empty({}, logits.options());
    ops::cross_entropy_forward(sublet::detail::context_for(loss), s, logits.dtype(), x.data_ptr(),
                               labels.data<std::int64_t>(), label_smoothing, loss.data_ptr());
  }
  if (autograd::any_requires_grad({logits})) {
    // The logits are saved instead of the softmax: same size, and backward recomputes it.
    autograd::record(op, {logits}, {loss},
                     [s, label_smoothing, x = autograd::save(x), labels = autograd::save(labels)](const TensorList& grads) {
                       const Tensor grad_loss = grads[0].contiguous();
                       Tensor grad_logits = Tensor::empty({s.batch, s.classes}, grad_loss.options());
                       ops::cross_entropy_backward(sublet::detail::context_for(grad_loss), s, grad_loss.dtype(),
                                                   grad_loss.data_ptr(), x.data_ptr(), labels.data<std::int64_t>(),
                                                   label_smoothing, grad_logits.data_ptr());
                       return TensorList{grad_logits};
                     });
  }
  return loss;
}

}  // namespace sublet::nn::functional
