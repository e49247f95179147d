#pragma once
// Classification losses over scores [N, C] (row-major, one row per sample), PyTorch semantics:
// log_softmax over the class dim, nll_loss and cross_entropy with mean reduction over the
// batch and int64 targets in [0, C). cross_entropy is fused (no log-probability buffer) and
// supports label smoothing: loss = (1-eps) * nll + eps * mean over classes of -log p.
// Scalars (loss, grad_loss) are one element of `dtype` in device memory, so the same calls
// work unchanged when the buffers live on a GPU. Not supported: class weights, ignore_index.
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

// label_smoothing in [0, 1]; 0 is plain cross entropy.
void cross_entropy_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                           const void* logits, const std::int64_t* targets,
                           double label_smoothing, void* loss);
// grad_logits (overwritten) = grad_loss / N * (softmax - (1-eps) * onehot - eps / C); the
// softmax is recomputed from the logits rather than kept from the forward pass.
void cross_entropy_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype,
                            const void* grad_loss, const void* logits,
                            const std::int64_t* targets, double label_smoothing,
                            void* grad_logits);

}  // namespace sublet::ops
