#pragma once
// CUDA embedding lookup and table gradient (ops/embedding.h), float32, float64 and 16-bit tables.
// Forward checks the ids on the host first (one small copy back). Backward: atomics into a zeroed
// table (float32/float64, not deterministic), or, when deterministic or for 16-bit tables, the ids
// sorted (a stable radix sort) and each id's rows summed in order in float32 (float64 for float64).
#include "ops/embedding.h"

namespace sublet::ops::cuda {

void embedding_forward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* weight,
                       const std::int64_t* indices, void* output);
void embedding_backward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* grad_output,
                        const std::int64_t* indices, bool deterministic, void* grad_weight);

}  // namespace sublet::ops::cuda
