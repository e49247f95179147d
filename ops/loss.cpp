#include "ops/loss.h"

#include <string>

#include "core/errors.h"
#include "ops/cpu/loss_cpu.h"
#include "ops/nn_dispatch.h"
#ifdef SUBLET_HAVE_CUDA
#include "ops/cuda/loss_cuda.h"
#endif

namespace sublet::ops {

namespace {


void check_label_smoothing(double label_smoothing) {
  if (!(label_smoothing >= 0 && label_smoothing <= 1)) {
    throw ValueError("cross_entropy: label_smoothing must be in [0, 1], got " +
                     std::to_string(label_smoothing));
  }
}

}  // namespace

void ClassScoresShape::validate(const char* op) const {
  if (batch < 1 || classes < 1) {
    throw ShapeError(std::string(op) + ": input must be non-empty [N, C], got [" +
                     std::to_string(batch) + ", " + std::to_string(classes) + "]");
  }
}

void log_softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                         const void* input, void* output) {
  shape.validate("log_softmax");
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) return cuda::log_softmax_forward(ctx, shape, dtype, input, output);
#endif
  detail::dispatch_float_kernel("log_softmax", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::log_softmax_forward<T>(shape, detail::typed<T>(input), detail::typed<T>(output));
  });
}

void log_softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                          const void* grad_output, const void* output, void* grad_input) {
  shape.validate("log_softmax");
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::log_softmax_backward(ctx, shape, dtype, grad_output, output, grad_input);
  }
#endif
  detail::dispatch_float_kernel("log_softmax", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::log_softmax_backward<T>(shape, detail::typed<T>(grad_output), detail::typed<T>(output), detail::typed<T>(grad_input));
  });
}

void nll_loss_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                      const void* log_probs, const std::int64_t* targets, void* loss) {
  shape.validate("nll_loss");
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::nll_loss_forward(ctx, shape, dtype, log_probs, targets, loss);
  }
#endif
  detail::dispatch_float_kernel("nll_loss", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::nll_loss_forward<T>(shape, detail::typed<T>(log_probs), targets, detail::typed<T>(loss));
  });
}

void nll_loss_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                       const void* grad_loss, const std::int64_t* targets, void* grad_log_probs) {
  shape.validate("nll_loss");
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::nll_loss_backward(ctx, shape, dtype, grad_loss, targets, grad_log_probs);
  }
#endif
  detail::dispatch_float_kernel("nll_loss", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::nll_loss_backward<T>(shape, detail::typed<T>(grad_loss), targets, detail::typed<T>(grad_log_probs));
  });
}

void cross_entropy_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                           const void* logits, const std::int64_t* targets,
                           double label_smoothing, void* loss) {
  shape.validate("cross_entropy");
  check_label_smoothing(label_smoothing);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::cross_entropy_forward(ctx, shape, dtype, logits, targets, label_smoothing, loss);
  }
#endif
  detail::dispatch_float_kernel("cross_entropy", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::cross_entropy_forward<T>(shape, detail::typed<T>(logits), targets, label_smoothing, detail::typed<T>(loss));
  });
}

void cross_entropy_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                            const void* grad_loss, const void* logits,
                            const std::int64_t* targets, double label_smoothing,
                            void* grad_logits) {
  shape.validate("cross_entropy");
  check_label_smoothing(label_smoothing);
#ifdef SUBLET_HAVE_CUDA
  if (ctx.device.is_cuda()) {
    return cuda::cross_entropy_backward(ctx, shape, dtype, grad_loss, logits, targets,
                                        label_smoothing, grad_logits);
  }
#endif
  detail::dispatch_float_kernel("cross_entropy", ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    cpu::cross_entropy_backward<T>(shape, detail::typed<T>(grad_loss), detail::typed<T>(logits), targets,
                                   label_smoothing, detail::typed<T>(grad_logits));
  });
}

}  // namespace sublet::ops
