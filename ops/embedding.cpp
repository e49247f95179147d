#include "ops/embedding.h"

#include <string>

#include "core/errors.h"
#include "ops/embedding_kernels.h"

namespace sublet::ops {

void EmbeddingShape::validate(const char* op) const {
  if (count < 0 || num_embeddings < 1 || dim < 1) {
    throw ShapeError(std::string(op) + ": expected a non-empty table [num_embeddings, dim] and a non-negative id count, "
                     "got table [" + std::to_string(num_embeddings) + ", " + std::to_string(dim) + "] and " +
                     std::to_string(count) + " ids");
  }
}

void throw_embedding_index_error(std::int64_t position, std::int64_t id, std::int64_t num_embeddings) {
  throw ValueError("embedding: id " + std::to_string(id) + " at position " + std::to_string(position) +
                   " is outside the table of " + std::to_string(num_embeddings) + " embeddings (valid ids are 0 to " +
                   std::to_string(num_embeddings - 1) + ")");
}

void embedding_forward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* weight,
                       const std::int64_t* indices, void* output) {
  shape.validate("embedding");
  if (shape.count == 0) return;
  embedding_forward_kernels().get("embedding", ctx.device, dtype)(ctx, shape, dtype, weight, indices, output);
}

void embedding_backward(const Context& ctx, const EmbeddingShape& shape, DType dtype, const void* grad_output,
                        const std::int64_t* indices, bool deterministic, void* grad_weight) {
  shape.validate("embedding_backward");
  embedding_backward_kernels().get("embedding_backward", ctx.device, dtype)(ctx, shape, dtype, grad_output, indices,
                                                                            deterministic, grad_weight);
}

}  // namespace sublet::ops
