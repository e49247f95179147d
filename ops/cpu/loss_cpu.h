#pragma once
// CPU classification losses: rows spread over the OpenMP threads, sums in double.
#include <cstdint>

#include "ops/loss.h"

namespace sublet::ops::cpu {

template <typename T>
void log_softmax_forward(const ClassScoresShape& shape, const T* input, T* output);
template <typename T>
void log_softmax_backward(const ClassScoresShape& shape, const T* grad_output, const T* output,
                          T* grad_input);
template <typename T>
void nll_loss_forward(const ClassScoresShape& shape, const T* log_probs,
                      const std::int64_t* targets, T* loss);
template <typename T>
void nll_loss_backward(const ClassScoresShape& shape, const T* grad_loss,
                       const std::int64_t* targets, T* grad_log_probs);
template <typename T>
void cross_entropy_forward(const ClassScoresShape& shape, const T* logits, const std::int64_t* targets,
                           const CrossEntropyParams& params, T* loss, T* row_log_sum_exp);
template <typename T>
void cross_entropy_backward(const ClassScoresShape& shape, const T* grad_loss, const T* logits,
                            const std::int64_t* targets, const T* row_log_sum_exp, const CrossEntropyParams& params,
                            T* grad_logits);

}  // namespace sublet::ops::cpu
