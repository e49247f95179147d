#pragma once
// nn::Embedding, as LibTorch's: a table [num_embeddings, embedding_dim] initialised N(0, 1),
// looked up by int64 ids of any shape (functional::embedding).
//   auto wte = std::make_shared<nn::Embedding>(nn::EmbeddingOptions(50304, 768));
//   Tensor x = (*wte)(ids);  // ids [B, T] -> [B, T, 768]
#include "runtime/generator.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/module.h"

namespace sublet::nn {

class EmbeddingOptions {
 public:
  EmbeddingOptions(std::int64_t num_embeddings, std::int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  // Bit-identical table gradients run to run (functional::EmbeddingFuncOptions::deterministic).
  EmbeddingOptions& deterministic(bool value) { deterministic_ = value; return *this; }
  EmbeddingOptions& dtype(DType value) { dtype_ = value; return *this; }
  std::int64_t num_embeddings() const { return num_embeddings_; }
  std::int64_t embedding_dim() const { return embedding_dim_; }
  bool deterministic() const { return deterministic_; }
  DType dtype() const { return dtype_; }

 private:
  std::int64_t num_embeddings_, embedding_dim_;
  bool deterministic_ = false;
  DType dtype_ = DType::Float32;
};

class Embedding : public Module {
 public:
  explicit Embedding(const EmbeddingOptions& options, Generator& generator = default_generator());
  Tensor forward(const Tensor& indices) override;
  const EmbeddingOptions& options() const { return options_; }

  Tensor weight;  // [num_embeddings, embedding_dim]

 private:
  EmbeddingOptions options_;
};

}  // namespace sublet::nn
