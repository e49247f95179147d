// layer_norm: one fused kernel each way, mean and rstd saved for backward.
#include <numeric>

#include "ops/accumulate_dtype.h"
#include "ops/layer_norm.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

void check_affine(const char* op, const char* what, const Tensor& input, const Tensor& t, const Shape& normalized) {
  if (!t.defined()) return;
  nn::detail::check_like_input(op, input, t);
  if (t.sizes() != normalized) {
    throw ShapeError(std::string(op) + ": " + what + " must have the normalized shape " + shape_str(normalized) +
                     ", got " + shape_str(t.sizes()));
  }
}

}  // namespace

Tensor layer_norm(const Tensor& input, std::vector<std::int64_t> normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  if (amp::casts_to_float32({input, weight, bias})) {
    return layer_norm(amp::to_float32(input), std::move(normalized_shape), amp::to_float32(weight),
                      amp::to_float32(bias), eps);
  }
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  const Shape normalized(normalized_shape.begin(), normalized_shape.end());
  const auto k = static_cast<std::int64_t>(normalized.size());
  const bool fits = k >= 1 && k <= input.dim() &&
                    std::equal(normalized.begin(), normalized.end(), input.sizes().end() - k);
  if (!fits) {
    throw ShapeError(std::string(op) + ": normalized_shape " + shape_str(normalized) +
                     " must be non-empty and match the trailing dimensions of the input " + shape_str(input.sizes()));
  }
  check_affine(op, "weight", input, weight, normalized);
  check_affine(op, "bias", input, bias, normalized);
  const std::int64_t cols = shape_numel(normalized);
  const ops::LayerNormShape s{cols == 0 ? 0 : input.numel() / cols, cols};
  s.validate(op);
  const DType stats = ops::accumulate_dtype(input.dtype());
  Tensor out, x, w, mean, rstd;
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    w = nn::detail::contiguous_or_undefined(weight);
    const Tensor b = nn::detail::contiguous_or_undefined(bias);
    out = Tensor::empty(input.sizes(), input.options());
    mean = Tensor::empty({s.rows}, input.options().dtype(stats));
    rstd = Tensor::empty({s.rows}, input.options().dtype(stats));
    ops::layer_norm_forward(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(),
                            nn::detail::data_or_null(w), nn::detail::data_or_null(b), eps, out.data_ptr(),
                            mean.data_ptr(), rstd.data_ptr());
  }
  if (autograd::any_requires_grad({input, weight, bias})) {
    autograd::record(op, {input, weight, bias}, {out},
                     [s, normalized, need_input = input.requires_grad(), need_weight = weight.defined() && weight.requires_grad(),
                      need_bias = bias.defined() && bias.requires_grad(), x = autograd::save(x),
                      w = w.defined() ? autograd::save(w) : Tensor(), mean = autograd::save(mean),
                      rstd = autograd::save(rstd)](const TensorList& grads) {
                       const Tensor grad_out = grads[0].contiguous();
                       Tensor grad_input, grad_weight, grad_bias;
                       if (need_input) grad_input = Tensor::empty(x.sizes(), x.options());
                       if (need_weight) grad_weight = Tensor::empty(normalized, x.options());
                       if (need_bias) grad_bias = Tensor::empty(normalized, x.options());
                       ops::layer_norm_backward(sublet::detail::context_for(grad_out), s, x.dtype(),
                                                grad_out.data_ptr(), x.data_ptr(), nn::detail::data_or_null(w),
                                                mean.data_ptr(), rstd.data_ptr(), nn::detail::data_or_null(grad_input),
                                                nn::detail::data_or_null(grad_weight),
                                                nn::detail::data_or_null(grad_bias));
                       return TensorList{grad_input, grad_weight, grad_bias};
                     });
  }
  return out;
}

}  // namespace sublet::nn::functional
