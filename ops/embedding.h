#pragma once
// Embedding lookup: out[i, :] = weight[indices[i], :] for `count` int64 ids into a table
// [num_embeddings, dim] (row-major). Backward adds each row of grad_output into the row of the
// table its id names. An id outside [0, num_embeddings) throws ValueError naming the id, its
// position and the table size (on CUDA the ids are checked on the host first: one small copy back).
#include <cstdint>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops {

struct EmbeddingShape {
  std::int64_t count = 0;           // ids looked up
  std::int64_t num_embeddings = 0;  // table rows
  std::int64_t dim = 0;             // table columns

  void validate(const char* op) const;  // throws ShapeError naming op and the sizes
};

// The error every backend throws for a bad id (one message for all devices).
[[noreturn]] void throw_embedding_index_error(std::int64_t position, std::int64_t id, std::int64_t num_embeddings);

void embedding_forward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* weight,
                       const std::int64_t* indices, void* output);
// grad_weight [num_embeddings, dim] is overwritten. deterministic: the sums are formed in the same
// order on every run (bit-identical gradients); otherwise CUDA adds rows with atomics, whose order
// varies. The CPU kernel is always deterministic. The ids were checked by the forward call.
void embedding_backward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* grad_output,
                        const std::int64_t* indices, bool deterministic, void* grad_weight);

}  // namespace sublet::ops
