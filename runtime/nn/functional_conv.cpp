// conv2d: ops::conv2d_forward plus one node whose backward runs the two backward kernels.
#include "ops/conv2d.h"
#include "ops/conv2d_kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

ops::Conv2dShape conv_shape(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& o) {
  ops::Conv2dShape s;
  s.batch = input.size(0);
  s.in_channels = input.size(1);
  s.in_height = input.size(2);
  s.in_width = input.size(3);
  s.out_channels = weight.size(0);
  s.kernel_h = weight.size(2);
  s.kernel_w = weight.size(3);
  s.stride_h = o.stride().h;
  s.stride_w = o.stride().w;
  s.pad_h = o.padding().h;
  s.pad_w = o.padding().w;
  s.dilation_h = o.dilation().h;
  s.dilation_w = o.dilation().w;
  s.groups = o.groups();
  if (s.groups >= 1 && weight.size(1) * s.groups != s.in_channels) {
    throw ShapeError("conv2d: weight " + shape_str(weight.sizes()) + " with groups " + std::to_string(s.groups) +
                     " expects " + std::to_string(weight.size(1) * s.groups) + " input channels, input " +
                     shape_str(input.sizes()) + " has " + std::to_string(s.in_channels));
  }
  s.validate();
  return s;
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dFuncOptions& options) {
  const char* op = "conv2d";
  if (amp::casts_to_lower({input, weight, bias})) {
    return conv2d(amp::to_lower(input), amp::to_lower(weight), amp::to_lower(bias), options);
  }
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  nn::detail::check_like_input(op, input, weight);
  nn::detail::check_rank(op, "input", input, 4, "(N,C,H,W)");
  nn::detail::check_rank(op, "weight", weight, 4, "(OC,C/groups,KH,KW)");
  nn::detail::check_per_channel(op, "bias", input, bias, weight.size(0));
  ops::Conv2dShape s = conv_shape(input, weight, options);
  s.format = nn::detail::choose_format(
      input, {&ops::conv2d_forward_kernels(), &ops::conv2d_backward_input_kernels(), &ops::conv2d_backward_weight_kernels()},
      weight);
  // A channels-last parameter gets its gradient channels-last (as PyTorch), whatever layout the kernels ran in.
  const MemoryFormat weight_format = weight.suggest_memory_format();

  Tensor x, w, out;
  {
    NoGradGuard no_grad;  // layout copies are internal: the node below covers the whole op
    x = input.contiguous(s.format);
    w = weight.contiguous(s.format);
    const Tensor b = nn::detail::contiguous_or_undefined(bias);
    out = Tensor::empty({s.batch, s.out_channels, s.out_height(), s.out_width()}, input.options(), s.format);
    ops::conv2d_forward(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(), w.data_ptr(),
                        nn::detail::data_or_null(b), out.data_ptr());
  }
  if (autograd::any_requires_grad({input, weight, bias})) {
    const bool need_input = input.requires_grad();
    const bool need_weight = weight.requires_grad();
    const bool need_bias = bias.defined() && bias.requires_grad();
    // Weight and bias gradients that go straight to leaves (parameters) in the layout they are
    // computed in: nothing but the optimizer reads them, and every buffer the filter pass writes
    // is returned to the engine, so the filter pass may finish beside the rest of backward.
    const bool leaf_gradients =
        need_weight && weight.is_leaf() && weight.is_contiguous(s.format) && (!need_bias || bias.is_leaf());
    autograd::record(
        op, {input, weight, bias}, {out},
        [s, weight_format, need_input, need_weight, need_bias, leaf_gradients,
         x = (need_weight || need_bias) ? autograd::save(x) : Tensor(),
         w = need_input ? autograd::save(w) : Tensor()](const TensorList& grads,
                                                        const autograd::BackwardContext& context) {
          const Tensor grad_out = grads[0].contiguous(s.format);
          const auto ctx = sublet::detail::context_for(grad_out);
          Tensor grad_input, grad_weight, grad_bias;
          const bool need_filter = need_weight || need_bias;
          // The input's gradient collected so far (a residual block's shortcut): the pass adds to
          // it (BackwardContext::gradient_sum_target), where the backend can.
          const Tensor sum_into = need_input ? context.gradient_sum_target(0) : Tensor();
          const auto input_pass = [&](const ops::Context& c) {
            if (sum_into.defined() && sum_into.dtype() == grad_out.dtype() && sum_into.is_contiguous(s.format) &&
                ops::conv2d_backward_input_accumulate(c, s, grad_out.dtype(), grad_out.data_ptr(), w.data_ptr(),
                                                      sum_into.data_ptr())) {
              grad_input = sum_into;
              return;
            }
            grad_input = Tensor::empty({s.batch, s.in_channels, s.in_height, s.in_width}, grad_out.options(), s.format);
            ops::conv2d_backward_input(c, s, grad_out.dtype(), grad_out.data_ptr(), w.data_ptr(), grad_input.data_ptr());
          };
          const auto filter_pass = [&](const ops::Context& c) {
            grad_weight = Tensor::empty(
                {s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w}, grad_out.options(), s.format);
            if (need_bias) grad_bias = Tensor::empty({s.out_channels}, grad_out.options());
            ops::conv2d_backward_weight(c, s, grad_out.dtype(), grad_out.data_ptr(), x.data_ptr(),
                                        grad_weight.data_ptr(), nn::detail::data_or_null(grad_bias));
          };
          // The two gradients read the same inputs and write apart: where they run is the step
          // scheduler's choice (runtime/step/scheduler.h).
          autograd::BackwardPasses passes;
          if (need_input) passes.main = input_pass;
          if (need_filter) passes.side = filter_pass;
          if (leaf_gradients) {
            passes.keep = {x, grad_out};  // should the filter pass run on past this node
            passes.side_writes_only_leaves = true;
          }
          context.run_passes(ctx, std::move(passes));
          if (!need_weight) grad_weight = Tensor();
          // (A filter pass still running beside: the engine gives the leaf its layout, after waiting.)
          if (need_weight && !leaf_gradients) grad_weight = grad_weight.contiguous(weight_format);
          return TensorList{grad_input, grad_weight, grad_bias};
        });
  }
  return out;
}

}  // namespace sublet::nn::functional
