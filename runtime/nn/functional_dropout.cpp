// dropout: a counter-based mask from one seed drawn from the caller's generator; backward
// regenerates the mask from that seed, so no mask tensor is kept alive between the passes.
// The seed is drawn on the host, so a CUDA graph would replay one mask forever: refused there.
#include "ops/dropout.h"
#include "ops/stream_capture.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

Tensor dropout(const Tensor& input, double p, bool training, Generator& generator) {
  const char* op = "dropout";
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  if (!(p >= 0 && p <= 1)) throw ValueError("dropout: p must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0) return input;  // the identity, as in PyTorch
  if (ops::stream_is_capturing(sublet::detail::context_for(input)))
    throw ValueError("dropout: a CUDA graph would replay the mask drawn at its capture on every step (the seed is drawn "
                     "on the host); train with dropout 0 or without the CUDA graph (--cuda-graph)");
  const std::uint64_t seed = generator.engine()();
  const std::uint64_t offset = 0;  // one seed per call: every call starts its own stream
  Tensor out;
  Shape layout;
  {
    NoGradGuard no_grad;
    // A dense input (channels-last included) is masked in its own memory order: the mask is a
    // function of the position in the buffer, and the output keeps the input's layout.
    const Tensor x = input.is_non_overlapping_and_dense() ? input : input.contiguous();
    out = Tensor::empty_strided(x.sizes(), x.strides(), input.options());
    layout = x.strides();
    ops::dropout_forward(sublet::detail::context_for(out), input.numel(), input.dtype(), x.data_ptr(), p, seed,
                         offset, out.data_ptr());
  }
  if (autograd::any_requires_grad({input})) {
    autograd::record(op, {input}, {out}, [p, seed, offset, layout](const TensorList& grads) {
      const Tensor grad_out = sublet::detail::in_layout(grads[0], layout);  // the forward's mask order
      Tensor grad_input = Tensor::empty_strided(grads[0].sizes(), layout, grad_out.options());
      ops::dropout_backward(sublet::detail::context_for(grad_out), grad_out.numel(), grad_out.dtype(),
                            grad_out.data_ptr(), p, seed, offset, grad_input.data_ptr());
      return TensorList{grad_input};
    });
  }
  return out;
}

}  // namespace sublet::nn::functional
