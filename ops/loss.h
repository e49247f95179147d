#pragma once
// Classification losses over scores [N, C] (row-major, one row per sample), PyTorch semantics:
// log_softmax over the class dim, nll_loss and cross_entropy with mean reduction over the
// batch and int64 targets in [0, C). cross_entropy is fused (no log-probability buffer), skips
// the samples whose target is ignore_index and supports label smoothing:
// loss = (1-eps) * nll + eps * mean over classes of -log p.
// Scalars (loss, grad_loss) are one element in device memory, so the same calls work unchanged
// when the buffers live on a GPU: of `dtype` for log_softmax and nll_loss, of
// accumulate_dtype(dtype) (ops/accumulate_dtype.h) for cross_entropy. Not supported: class weights.
#include <cstdint>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

struct ClassScoresShape {
  std::int64_t batch = 0, classes = 0;

  std::int64_t numel() const { return batch * classes; }
  void validate(const char* op) const;  // throws ShapeError naming op and the sizes
};

void log_softmax_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                         const void* input, void* output);
// grad_input = grad_output - softmax * rowsum(grad_output), from the forward's output.
void log_softmax_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                          const void* grad_output, const void* output, void* grad_input);

// loss = -mean_n log_probs[n, targets[n]]. Throws ValueError naming the sample for a target
// outside [0, C).
void nll_loss_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                      const void* log_probs, const std::int64_t* targets, void* loss);
// grad_log_probs (overwritten) = -grad_loss / N at each target, 0 elsewhere.
void nll_loss_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                       const void* grad_loss, const std::int64_t* targets, void* grad_log_probs);

struct CrossEntropyParams {
  double label_smoothing = 0.0;       // in [0, 1]; 0 is plain cross entropy
  std::int64_t ignore_index = -100;   // samples with this target add nothing and are not counted
};

// loss = mean over the counted samples (those whose target is not ignore_index; NaN when there
// are none, as PyTorch). Logits of any supported dtype (16-bit on CUDA) are read once, in one
// pass per row: no float32 copy of them is made. row_log_sum_exp [N] (accumulate_dtype) receives
// each row's log-sum-exp for the backward; loss is one accumulate_dtype element.
void cross_entropy_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                           const void* logits, const std::int64_t* targets,
                           const CrossEntropyParams& params, void* loss, void* row_log_sum_exp);
// grad_logits (overwritten, in the logits' dtype) = grad_loss / count * (softmax - (1-eps) *
// onehot - eps / C) on counted rows and 0 on ignored ones; the softmax comes from the logits and
// the forward's row_log_sum_exp, in one pass. grad_loss is one accumulate_dtype element.
void cross_entropy_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                            const void* grad_loss, const void* logits,
                            const std::int64_t* targets, const void* row_log_sum_exp,
                            const CrossEntropyParams& params, void* grad_logits);

}  // namespace sublet::ops
