#include "ops/loss.h"

#include <string>

#include "core/errors.h"
#include "ops/loss_kernels.h"

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
  log_softmax_forward_kernels().get("log_softmax", ctx.device, dtype)(ctx, shape, dtype, input, output);
}

void log_softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                          const void* grad_output, const void* output, void* grad_input) {
  shape.validate("log_softmax");
  log_softmax_backward_kernels().get("log_softmax", ctx.device, dtype)(ctx, shape, dtype, grad_output, output,
                                                                       grad_input);
}

void nll_loss_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                      const void* log_probs, const std::int64_t* targets, void* loss) {
  shape.validate("nll_loss");
  nll_loss_forward_kernels().get("nll_loss", ctx.device, dtype)(ctx, shape, dtype, log_probs, targets, loss);
}

void nll_loss_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                       const void* grad_loss, const std::int64_t* targets, void* grad_log_probs) {
  shape.validate("nll_loss");
  nll_loss_backward_kernels().get("nll_loss", ctx.device, dtype)(ctx, shape, dtype, grad_loss, targets,
                                                                 grad_log_probs);
}

void cross_entropy_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                           const void* logits, const std::int64_t* targets,
                           const CrossEntropyParams& params, void* loss, void* row_log_sum_exp) {
  shape.validate("cross_entropy");
  check_label_smoothing(params.label_smoothing);
  cross_entropy_forward_kernels().get("cross_entropy", ctx.device, dtype)(ctx, shape, dtype, logits, targets, params,
                                                                          loss, row_log_sum_exp);
}

void cross_entropy_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                            const void* grad_loss, const void* logits,
                            const std::int64_t* targets, const void* row_log_sum_exp,
                            const CrossEntropyParams& params, void* grad_logits) {
  shape.validate("cross_entropy");
  check_label_smoothing(params.label_smoothing);
  cross_entropy_backward_kernels().get("cross_entropy", ctx.device, dtype)(ctx, shape, dtype, grad_loss, logits,
                                                                           targets, row_log_sum_exp, params,
                                                                           grad_logits);
}

}  // namespace sublet::ops
