#pragma once
// Kernel tables of classification losses (ops/loss.h).
// Each entry point's kernel signature and its table (ops/kernel_table.h). The CPU kernels
// register in ops/cpu/register_cpu_kernels.cpp, the CUDA ones in ops/cuda/register_cuda_kernels.cpp.
// The dtype argument stays in the signature: the CUDA kernels take it and serve several dtypes.
#include "ops/loss.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

using LogSoftmaxForwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype,
    const void* input, void* output);
using LogSoftmaxBackwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype,
    const void* grad_output, const void* output, void* grad_input);
using NllLossForwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype,
    const void* log_probs, const std::int64_t* targets, void* loss);
using NllLossBackwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype,
    const void* grad_loss, const std::int64_t* targets, void* grad_log_probs);
using CrossEntropyForwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype,
    const void* logits, const std::int64_t* targets, const CrossEntropyParams& params, void* loss,
    void* row_log_sum_exp);
using CrossEntropyBackwardKernel = void(const Context& ctx, const ClassScoresShape& shape, DType dtype,
    const void* grad_loss, const void* logits, const std::int64_t* targets, const void* row_log_sum_exp,
    const CrossEntropyParams& params, void* grad_logits);

// Constant-initialised, no guard: one address per table, shared by every translation unit.
inline KernelTable<LogSoftmaxForwardKernel>& log_softmax_forward_kernels() {
  static constinit KernelTable<LogSoftmaxForwardKernel> table;
  return table;
}
inline KernelTable<LogSoftmaxBackwardKernel>& log_softmax_backward_kernels() {
  static constinit KernelTable<LogSoftmaxBackwardKernel> table;
  return table;
}
inline KernelTable<NllLossForwardKernel>& nll_loss_forward_kernels() {
  static constinit KernelTable<NllLossForwardKernel> table;
  return table;
}
inline KernelTable<NllLossBackwardKernel>& nll_loss_backward_kernels() {
  static constinit KernelTable<NllLossBackwardKernel> table;
  return table;
}
inline KernelTable<CrossEntropyForwardKernel>& cross_entropy_forward_kernels() {
  static constinit KernelTable<CrossEntropyForwardKernel> table;
  return table;
}
inline KernelTable<CrossEntropyBackwardKernel>& cross_entropy_backward_kernels() {
  static constinit KernelTable<CrossEntropyBackwardKernel> table;
  return table;
}

}  // namespace sublet::ops
