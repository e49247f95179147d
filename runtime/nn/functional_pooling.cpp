// max_pool2d, avg_pool2d, adaptive_avg_pool2d over the pooling kernels, one node each.
#include "ops/pooling.h"
#include "ops/pooling_kernels.h"
#include "runtime/autograd/function.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/functional_checks.h"

namespace sublet::nn::functional {

using autograd::TensorList;

namespace {

void check_input(const char* op, const Tensor& input) {
  sublet::detail::check_defined(op, input);
  sublet::detail::check_floating(op, input);
  nn::detail::check_rank(op, "input", input, 4, "(N,C,H,W)");
}

ops::Pool2dShape pool_shape(const char* op, const Tensor& input, Pair2d kernel, Pair2d stride, Pair2d padding,
                            Pair2d dilation) {
  ops::Pool2dShape s;
  s.batch = input.size(0);
  s.channels = input.size(1);
  s.in_height = input.size(2);
  s.in_width = input.size(3);
  s.kernel_h = kernel.h;
  s.kernel_w = kernel.w;
  // PyTorch: an unset stride is the kernel size.
  s.stride_h = stride.h == 0 && stride.w == 0 ? kernel.h : stride.h;
  s.stride_w = stride.h == 0 && stride.w == 0 ? kernel.w : stride.w;
  s.pad_h = padding.h;
  s.pad_w = padding.w;
  s.dilation_h = dilation.h;
  s.dilation_w = dilation.w;
  s.validate(op);
  return s;
}

Shape output_sizes(const ops::Pool2dShape& s) { return {s.batch, s.channels, s.out_height(), s.out_width()}; }
Shape input_sizes(const ops::Pool2dShape& s) { return {s.batch, s.channels, s.in_height, s.in_width}; }

}  // namespace

Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& options) {
  const char* op = "max_pool2d";
  check_input(op, input);
  ops::Pool2dShape s =
      pool_shape(op, input, options.kernel_size(), options.stride(), options.padding(), options.dilation());
  s.format = nn::detail::choose_format(input, {&ops::max_pool2d_forward_kernels(), &ops::max_pool2d_backward_kernels()});
  // The saved argmax is internal: one-byte window positions where the device has their kernels
  // (an eighth of the int64 indices' memory), else the int64 indices.
  const ops::Context ctx = sublet::detail::context_for(input);
  const bool positions = ops::max_pool2d_has_positions(ctx, s, input.dtype());
  Tensor out, argmax;
  {
    NoGradGuard no_grad;
    const Tensor x = input.contiguous(s.format);
    out = Tensor::empty(output_sizes(s), input.options(), s.format);
    if (positions) {
      argmax = Tensor::empty(output_sizes(s), input.options().dtype(DType::UInt8), s.format);
      ops::max_pool2d_forward_positions(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(),
                                        out.data_ptr(), static_cast<std::uint8_t*>(argmax.data_ptr()));
    } else {
      argmax = Tensor::empty(output_sizes(s), input.options().dtype(DType::Int64), s.format);
      ops::max_pool2d_forward(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(), out.data_ptr(),
                              argmax.data<std::int64_t>());
    }
  }
  if (autograd::any_requires_grad({input})) {
    autograd::record(op, {input}, {out}, [s, positions, argmax = autograd::save(argmax)](const TensorList& grads) {
      const Tensor grad_out = grads[0].contiguous(s.format);
      Tensor grad_input = Tensor::empty(input_sizes(s), grad_out.options(), s.format);
      const ops::Context grad_ctx = sublet::detail::context_for(grad_out);
      if (positions) {
        ops::max_pool2d_backward_positions(grad_ctx, s, grad_out.dtype(), grad_out.data_ptr(),
                                           static_cast<std::uint8_t*>(argmax.data_ptr()), grad_input.data_ptr());
      } else {
        ops::max_pool2d_backward(grad_ctx, s, grad_out.dtype(), grad_out.data_ptr(), argmax.data<std::int64_t>(),
                                 grad_input.data_ptr());
      }
      return TensorList{grad_input};
    });
  }
  return out;
}

Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& options) {
  const char* op = "avg_pool2d";
  check_input(op, input);
  ops::Pool2dShape s = pool_shape(op, input, options.kernel_size(), options.stride(), options.padding(), 1);
  s.format = nn::detail::choose_format(input, {&ops::avg_pool2d_forward_kernels(), &ops::avg_pool2d_backward_kernels()});
  const bool count_include_pad = options.count_include_pad();
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor x = input.contiguous(s.format);
    out = Tensor::empty(output_sizes(s), input.options(), s.format);
    ops::avg_pool2d_forward(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(), out.data_ptr(),
                            count_include_pad);
  }
  if (autograd::any_requires_grad({input})) {
    autograd::record(op, {input}, {out}, [s, count_include_pad](const TensorList& grads) {
      const Tensor grad_out = grads[0].contiguous(s.format);
      Tensor grad_input = Tensor::empty(input_sizes(s), grad_out.options(), s.format);
      ops::avg_pool2d_backward(sublet::detail::context_for(grad_out), s, grad_out.dtype(), grad_out.data_ptr(),
                               grad_input.data_ptr(), count_include_pad);
      return TensorList{grad_input};
    });
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, Pair2d output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_input(op, input);
  ops::AdaptivePool2dShape s{input.size(0), input.size(1), input.size(2), input.size(3), output_size.h,
                             output_size.w};
  s.validate();
  s.format = nn::detail::choose_format(
      input, {&ops::adaptive_avg_pool2d_forward_kernels(), &ops::adaptive_avg_pool2d_backward_kernels()});
  Tensor out;
  {
    NoGradGuard no_grad;
    const Tensor x = input.contiguous(s.format);
    out = Tensor::empty({s.batch, s.channels, s.out_height, s.out_width}, input.options(), s.format);
    ops::adaptive_avg_pool2d_forward(sublet::detail::context_for(out), s, input.dtype(), x.data_ptr(),
                                     out.data_ptr());
  }
  if (autograd::any_requires_grad({input})) {
    autograd::record(op, {input}, {out}, [s](const TensorList& grads) {
      const Tensor grad_out = grads[0].contiguous(s.format);
      Tensor grad_input = Tensor::empty({s.batch, s.channels, s.in_height, s.in_width}, grad_out.options(), s.format);
      ops::adaptive_avg_pool2d_backward(sublet::detail::context_for(grad_out), s, grad_out.dtype(),
                                        grad_out.data_ptr(), grad_input.data_ptr());
      return TensorList{grad_input};
    });
  }
  return out;
}

}  // namespace sublet::nn::functional
