#include "runtime/nn/embedding.h"

#include "core/errors.h"
#include "runtime/factories.h"

namespace sublet::nn {

Embedding::Embedding(const EmbeddingOptions& options, Generator& generator) : Module("Embedding"), options_(options) {
  if (options.num_embeddings() <= 0 || options.embedding_dim() <= 0) {
    throw ValueError("Embedding: num_embeddings and embedding_dim must be positive, got " +
                     std::to_string(options.num_embeddings()) + " and " + std::to_string(options.embedding_dim()));
  }
  weight = register_parameter(
      "weight", normal({options.num_embeddings(), options.embedding_dim()}, 0.0, 1.0, generator, options.dtype()));
}

Tensor Embedding::forward(const Tensor& indices) {
  return functional::embedding(weight, indices, functional::EmbeddingFuncOptions().deterministic(options_.deterministic()));
}

}  // namespace sublet::nn
