#pragma once
// CPU embedding lookup and its gradient (ops/embedding.h), float32 and float64.
#include "ops/embedding.h"

namespace sublet::ops::cpu {

template <typename T>
void embedding_forward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* weight,
                       const std::int64_t* indices, void* output);
// Always deterministic: each column block adds the rows in id order, whatever `deterministic` says.
template <typename T>
void embedding_backward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* grad_output,
                        const std::int64_t* indices, bool deterministic, void* grad_weight);

}  // namespace sublet::ops::cpu
