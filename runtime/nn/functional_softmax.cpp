// softmax and log_softmax over one dimension, one node each. The kernels run over the last
// dimension; another dimension is transposed last and back (the transposes are views, recorded
// as such, and the kernel's input copy makes the rows contiguous).
#include "ops/loss.h"
#include "ops/softmax.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

using RowKernel = void (*)(const ops::Context&, const ops::ClassScoresShape&, DType, const void*, void*);
using RowBackwardKernel = void (*)(const ops::Context&, const ops::ClassScoresShape&, DType, const void*, const void*,
                                   void*);

// The op over the last dimension of `input`; backward needs only the forward's output.
Tensor over_last_dim(const char* op, const Tensor& input, RowKernel forward, RowBackwardKernel backward) {
  const std::int64_t classes = input.size(input.dim() - 1);
  const ops::ClassScoresShape s{classes == 0 ? 0 : input.numel() / classes, classes};
  s.validate(op);
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor x = input.contiguous();
    out = Tensor::empty(input.sizes(), input.options());
    forward(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(), out.data_ptr());
  }
  if (autograd::any_requires_grad({input})) {
    autograd::record(op, {input}, {out}, [s, backward, out = autograd::save(out)](const TensorList& grads) {
      const Tensor grad_out = grads[0].contiguous();
      Tensor grad_input = Tensor::empty(grads[0].sizes(), grad_out.options());
      backward(sublet::detail::context_for(grad_out), s, grad_out.dtype(), grad_out.data_ptr(), out.data_ptr(),
               grad_input.data_ptr());
      return TensorList{grad_input};
    });
  }
  return out;
}

Tensor over_dim(const char* op, const Tensor& input, std::int64_t dim, RowKernel forward, RowBackwardKernel backward) {
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  if (input.dim() == 0) {
    throw ShapeError(std::string(op) + ": expected a tensor of at least one dimension, got a 0-dim tensor");
  }
  const std::int64_t d = wrap_dim(op, dim, input.sizes());
  const std::int64_t last = input.dim() - 1;
  if (d == last) return over_last_dim(op, input, forward, backward);
  return over_last_dim(op, input.transpose(d, last), forward, backward).transpose(d, last);
}

}  // namespace

Tensor softmax(const Tensor& input, std::int64_t dim) {
  if (amp::casts_to_float32({input})) return softmax(amp::to_float32(input), dim);
  return over_dim("softmax", input, dim, &ops::softmax_forward, &ops::softmax_backward);
}

Tensor log_softmax(const Tensor& input, std::int64_t dim) {
  if (amp::casts_to_float32({input})) return log_softmax(amp::to_float32(input), dim);
  return over_dim("log_softmax", input, dim, &ops::log_softmax_forward, &ops::log_softmax_backward);
}

}  // namespace sublet::nn::functional
