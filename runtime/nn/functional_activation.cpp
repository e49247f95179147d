// gelu: one kernel each way; backward reads the saved input.
#include "ops/gelu.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

Tensor gelu(const Tensor& input, GeluApproximate approximate) {
  const char* op = "gelu";
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  Tensor out, x;
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    out = Tensor::empty(input.sizes(), input.options());
    ops::gelu_forward(sublet::detail::context_for(out), input.dtype(), input.numel(), approximate, x.data_ptr(),
                      out.data_ptr());
  }
  if (autograd::any_requires_grad({input})) {
    autograd::record(op, {input}, {out}, [approximate, x = autograd::save(x)](const TensorList& grads) {
      const Tensor grad_out = grads[0].contiguous();
      Tensor grad_input = Tensor::empty(x.sizes(), grad_out.options());
      ops::gelu_backward(sublet::detail::context_for(grad_out), grad_out.dtype(), x.numel(), approximate,
                         grad_out.data_ptr(), x.data_ptr(), grad_input.data_ptr());
      return TensorList{grad_input};
    });
  }
  return out;
}

}  // namespace sublet::nn::functional
