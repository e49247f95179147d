// layer_norm: one fused kernel each way, mean and rstd saved for backward; the fused core
// (runtime/nn/layer_norm_fused.h) shared with add_layer_norm.
#include <numeric>
#include <optional>
#include <utility>

#include "ops/accumulate_dtype.h"
#include "ops/layer_norm.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"
#include "runtime/nn/layer_norm_fused.h"

namespace sublet::nn::detail {

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

std::pair<Tensor, Tensor> fused_layer_norm(const char* op, const Tensor& input, const Tensor& branch,
                                           const Shape& normalized, const ops::LayerNormShape& s, const Tensor& weight,
                                           const Tensor& bias, double eps, DType out_dtype) {
  const DType stats = ops::accumulate_dtype(input.dtype());
  Tensor sum, out, x, h, w, mean, rstd;
  {
    NoGradGuard no_grad;
    x = input.contiguous();
    h = nn::detail::contiguous_or_undefined(branch);
    w = nn::detail::contiguous_or_undefined(weight);
    const Tensor b = nn::detail::contiguous_or_undefined(bias);
    out = Tensor::empty(input.sizes(), input.options().dtype(out_dtype));
    if (h.defined()) sum = Tensor::empty(input.sizes(), input.options());
    mean = Tensor::empty({s.rows}, input.options().dtype(stats));
    rstd = Tensor::empty({s.rows}, input.options().dtype(stats));
    ops::LayerNormForwardArgs args;
    args.shape = s;
    args.dtype = input.dtype();
    args.output_dtype = out_dtype;
    args.input = x.data_ptr();
    args.branch = nn::detail::data_or_null(h);
    args.weight = nn::detail::data_or_null(w);
    args.bias = nn::detail::data_or_null(b);
    args.eps = eps;
    args.sum = nn::detail::data_or_null(sum);
    args.output = out.data_ptr();
    args.mean = mean.data_ptr();
    args.rstd = rstd.data_ptr();
    ops::layer_norm_fused_forward(sublet::detail::context_for(out), args);
  }
  const bool has_branch = h.defined();
  if (autograd::any_requires_grad({input, branch, weight, bias})) {
    autograd::TensorList outputs = has_branch ? autograd::TensorList{sum, out} : autograd::TensorList{out};
    autograd::record(
        op, {input, branch, weight, bias}, outputs,
        [s, normalized, out_dtype, has_branch, need_input = input.requires_grad(),
         need_branch = has_branch && branch.requires_grad(), need_weight = weight.defined() && weight.requires_grad(),
         need_bias = bias.defined() && bias.requires_grad(), x = autograd::save(has_branch ? sum : x),
         w = w.defined() ? autograd::save(w) : Tensor(), mean = autograd::save(mean),
         rstd = autograd::save(rstd)](const autograd::TensorList& grads) {
          const Tensor grad_sum = has_branch ? grads[0].contiguous() : Tensor();
          const Tensor grad_out = grads[has_branch ? 1 : 0].contiguous();
          Tensor grad_input, grad_branch, grad_weight, grad_bias;
          if (need_input || need_branch) grad_input = Tensor::empty(x.sizes(), x.options());
          if (need_branch) grad_branch = Tensor::empty(x.sizes(), x.options().dtype(out_dtype));
          if (need_weight) grad_weight = Tensor::empty(normalized, x.options());
          if (need_bias) grad_bias = Tensor::empty(normalized, x.options());
          ops::LayerNormBackwardArgs args;
          args.shape = s;
          args.dtype = x.dtype();
          args.output_dtype = out_dtype;
          args.grad_output = grad_out.data_ptr();
          args.grad_sum = nn::detail::data_or_null(grad_sum);
          args.input = x.data_ptr();
          args.weight = nn::detail::data_or_null(w);
          args.mean = mean.data_ptr();
          args.rstd = rstd.data_ptr();
          args.grad_input = nn::detail::data_or_null(grad_input);
          args.grad_branch = nn::detail::data_or_null(grad_branch);
          args.grad_weight = nn::detail::data_or_null(grad_weight);
          args.grad_bias = nn::detail::data_or_null(grad_bias);
          ops::layer_norm_fused_backward(sublet::detail::context_for(grad_out), args);
          return autograd::TensorList{need_input ? grad_input : Tensor(), grad_branch, grad_weight, grad_bias};
        });
  }
  return {sum, out};
}

ops::LayerNormShape layer_norm_rows(const char* op, const Tensor& input, const Shape& normalized, const Tensor& weight,
                                 const Tensor& bias) {
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
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
  return s;
}

void check_layer_norm_output_dtype(const char* op, DType dtype) {
  if (dtype == DType::Int64 || dtype == DType::UInt8) {
    throw DTypeError(std::string(op) + ": output_dtype must be a floating dtype, got " + dtype_name(dtype));
  }
}

}  // namespace sublet::nn::detail

namespace sublet::nn::functional {

using autograd::TensorList;

Tensor layer_norm(const Tensor& input, std::vector<std::int64_t> normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps, std::optional<DType> output_dtype) {
  const char* op = "layer_norm";
  if (amp::casts_to_float32({input, weight, bias})) {
    return layer_norm(amp::to_float32(input), std::move(normalized_shape), amp::to_float32(weight),
                      amp::to_float32(bias), eps, output_dtype);
  }
  if (output_dtype) nn::detail::check_layer_norm_output_dtype(op, *output_dtype);
  const Shape normalized(normalized_shape.begin(), normalized_shape.end());
  const ops::LayerNormShape s = nn::detail::layer_norm_rows(op, input, normalized, weight, bias);
  const DType out_dtype = output_dtype.value_or(input.dtype());
  if (out_dtype != input.dtype()) {
    // One kernel where the device has it; elsewhere the norm, then the cast.
    if (ops::layer_norm_fused_available(input.device().type, input.dtype(), out_dtype)) {
      return nn::detail::fused_layer_norm(op, input, Tensor(), normalized, s, weight, bias, eps, out_dtype).second;
    }
    return layer_norm(input, std::move(normalized_shape), weight, bias, eps).to(out_dtype);
  }
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
