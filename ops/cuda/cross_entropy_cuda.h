#pragma once
// CUDA cross-entropy behind ops/loss.h for float32, float64 and 16-bit logits (read as they are,
// never copied to float32). Targets are checked on the host first (one small copy back), ignore_index
// allowed. Row statistics and the loss in accumulate_dtype (float32, or float64 for float64).
#include "ops/loss.h"

namespace sublet::ops::cuda {

void cross_entropy_forward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* logits,
                           const std::int64_t* targets, const CrossEntropyParams& params, void* loss,
                           void* row_log_sum_exp);
void cross_entropy_backward(const Context& ctx, const ClassScoresShape& shape, DType dtype, const void* grad_loss,
                            const void* logits, const std::int64_t* targets, const void* row_log_sum_exp,
                            const CrossEntropyParams& params, void* grad_logits);

}  // namespace sublet::ops::cuda
