#include "ops/batch_norm.h"

#include <string>

#include "core/errors.h"
#include "ops/cpu/batch_norm_cpu.h"
#include "ops/nn_dispatch.h"
#ifdef SUBLET_HAVE_CUDA
#include "ops/cuda/batch_norm_cuda.h"
#endif

namespace sublet::ops {

namespace detail {

void check_eps(const char* op, double eps) {
  if (!(eps > 0)) throw ValueError(std::string(op) + ": eps must be > 0, got " + std::to_string(eps));
}

void check_momentum(const char* op, double momentum) {
  if (!(momentum >= 0 && momentum <= 1)) {
    throw ValueError(std::string(op) + ": momentum must be in [0, 1], got " + std::to_string(momentum));
  }
}

}  // namespace detail

void BatchNormShape::validate(bool training) const {
  if (batch < 1 || channels < 1 || height < 1 || width < 1) {
    throw ShapeError("batch_norm: input must be non-empty (N,C,H,W), got [" +
                     std::to_string(batch) + ", " + std::to_string(channels) + ", " +
                     std::to_string(height) + ", " + std::to_string(width) + "]");
  }
  if (training && batch * height * width < 2) {
    throw ShapeError("batch_norm: training needs more than 1 value per channel, got input [" +
                     std::to_string(batch) + ", " + std::to_string(channels) + ", " +
                     std::to_string(height) + ", " + std::to_string(width) + "]");
  }
}

void batch_norm_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                 const void* input, const void* weight, const void* bias,
                                 void* running_mean, void* running_var, double momentum,
                                 double eps, void* output, void* save_mean, void* save_invstd) {
  shape.validate(true);
  detail::check_eps("batch_norm", eps);
  detail::check_momentum("batch_norm", momentum);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::batch_norm_forward_training(ctx, shape, dtype, input, weight, bias, running_mean,
                                             running_var, momentum, eps, output, save_mean,
                                             save_invstd);
  }
#endif
  detail::dispatch_float_kernel("batch_norm", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::batch_norm_forward_training<T>(shape, detail::typed<T>(input), detail::typed<T>(weight), detail::typed<T>(bias),
                                        detail::typed<T>(running_mean), detail::typed<T>(running_var), momentum,
                                        eps, detail::typed<T>(output), detail::typed<T>(save_mean),
                                        detail::typed<T>(save_invstd));
  });
}

void batch_norm_forward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                             const void* input, const void* weight, const void* bias,
                             const void* running_mean, const void* running_var, double eps,
                             void* output) {
  shape.validate(false);
  detail::check_eps("batch_norm", eps);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::batch_norm_forward_eval(ctx, shape, dtype, input, weight, bias, running_mean,
                                         running_var, eps, output);
  }
#endif
  detail::dispatch_float_kernel("batch_norm", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::batch_norm_forward_eval<T>(shape, detail::typed<T>(input), detail::typed<T>(weight), detail::typed<T>(bias),
                                    detail::typed<T>(running_mean), detail::typed<T>(running_var), eps,
                                    detail::typed<T>(output));
  });
}

void batch_norm_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                  const void* grad_output, const void* input, const void* weight,
                                  const void* save_mean, const void* save_invstd,
                                  void* grad_input, void* grad_weight, void* grad_bias) {
  shape.validate(true);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::batch_norm_backward_training(ctx, shape, dtype, grad_output, input, weight,
                                              save_mean, save_invstd, grad_input, grad_weight,
                                              grad_bias);
  }
#endif
  detail::dispatch_float_kernel("batch_norm", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::batch_norm_backward_training<T>(shape, detail::typed<T>(grad_output), detail::typed<T>(input),
                                         detail::typed<T>(weight), detail::typed<T>(save_mean),
                                         detail::typed<T>(save_invstd), detail::typed<T>(grad_input),
                                         detail::typed<T>(grad_weight), detail::typed<T>(grad_bias));
  });
}

void batch_norm_backward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                              const void* grad_output, const void* input, const void* weight,
                              const void* running_mean, const void* running_var, double eps,
                              void* grad_input, void* grad_weight, void* grad_bias) {
  shape.validate(false);
  detail::check_eps("batch_norm", eps);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::batch_norm_backward_eval(ctx, shape, dtype, grad_output, input, weight,
                                          running_mean, running_var, eps, grad_input, grad_weight,
                                          grad_bias);
  }
#endif
  detail::dispatch_float_kernel("batch_norm", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::batch_norm_backward_eval<T>(shape, detail::typed<T>(grad_output), detail::typed<T>(input),
                                     detail::typed<T>(weight), detail::typed<T>(running_mean),
                                     detail::typed<T>(running_var), eps, detail::typed<T>(grad_input),
                                     detail::typed<T>(grad_weight), detail::typed<T>(grad_bias));
  });
}

}  // namespace sublet::ops
