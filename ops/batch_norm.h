#pragma once
// Batch normalisation over (N, H, W) for each channel of an NCHW-contiguous input, with
// PyTorch's semantics: training normalises with the batch mean and biased variance and moves
// the running statistics towards the batch mean and the *unbiased* variance by `momentum`;
// evaluation normalises with the running statistics. A [N, C] input is H = W = 1.
// All pointers are device memory of ctx.device, caller-allocated; per-channel buffers ([C]:
// weight, bias, running and saved statistics, grad_weight, grad_bias) are of the input's dtype,
// except for a bfloat16/float16 input, whose per-channel buffers are float32 (as PyTorch and
// cuDNN: the statistics and parameters stay float32). `dtype` is always the input's.
#include <cstdint>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

struct BatchNormShape {
  std::int64_t batch = 0, channels = 0, height = 1, width = 1;
  // Contiguous: every buffer is NCHW-dense. ChannelsLast: activations are NHWC-dense (C fastest)
  // and the per-channel
  // vectors are unchanged. Picks the kernel table's entry (ops/kernel_table.h), as dtype does.
  MemoryFormat format = MemoryFormat::Contiguous;

  std::int64_t spatial() const { return height * width; }
  std::int64_t numel() const { return batch * channels * height * width; }
  // Throws ShapeError naming batch_norm. Training needs more than one value per channel
  // (the variance of a single value says nothing), as in PyTorch.
  void validate(bool training) const;
};

namespace detail {
// ValueError "<op>: eps must be > 0, got ..." / "<op>: momentum must be in [0, 1], got ...";
// shared by the batch norm ops here and the fused ones (ops/batch_norm_relu.h).
void check_eps(const char* op, double eps);
void check_momentum(const char* op, double momentum);
// *num_batches_tracked += 1 on ctx.device (one elementwise launch): the count where no kernel folds it in.
void count_batch_apart(const Context& ctx, std::int64_t* num_batches_tracked);
}  // namespace detail

// output = (input - mean) * invstd * weight + bias with the batch's statistics.
// Writes save_mean[C] and save_invstd[C] = 1/sqrt(var_biased + eps) for the backward pass.
// weight and bias may be nullptr (no affine transform); running_mean and running_var may be
// nullptr (no running statistics); when given they are updated in place:
//   running = (1 - momentum) * running + momentum * batch_statistic.
// num_batches_tracked (an int64 scalar on ctx.device, or nullptr) is incremented by one: inside
// the kernels' own launches where the backend folds it in, else by one more small launch (the
// module's buffer of the same name, without a launch of its own per batch norm).
void batch_norm_forward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                 const void* input, const void* weight, const void* bias,
                                 void* running_mean, void* running_var, double momentum,
                                 double eps, void* output, void* save_mean, void* save_invstd,
                                 std::int64_t* num_batches_tracked = nullptr);

// output = (input - running_mean) / sqrt(running_var + eps) * weight + bias.
void batch_norm_forward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                             const void* input, const void* weight, const void* bias,
                             const void* running_mean, const void* running_var, double eps,
                             void* output);

// Gradients of training-mode batch norm (the batch statistics depend on the input).
// Any of grad_input, grad_weight, grad_bias may be nullptr when not wanted; weight may be
// nullptr (no affine transform: weight = 1). Outputs are overwritten.
void batch_norm_backward_training(const Context& ctx, const BatchNormShape& shape, DType dtype,
                                  const void* grad_output, const void* input, const void* weight,
                                  const void* save_mean, const void* save_invstd,
                                  void* grad_input, void* grad_weight, void* grad_bias);

// Gradients of eval-mode batch norm (the running statistics are constants).
void batch_norm_backward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype,
                              const void* grad_output, const void* input, const void* weight,
                              const void* running_mean, const void* running_var, double eps,
                              void* grad_input, void* grad_weight, void* grad_bias);

}  // namespace sublet::ops
