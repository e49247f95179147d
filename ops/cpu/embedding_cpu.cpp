#include "ops/cpu/embedding_cpu.h"

#include <algorithm>
#include <cstdint>

namespace sublet::ops::cpu {

namespace {

// Before any parallel loop: an exception must not escape an OpenMP region.
void check_ids(const EmbeddingShape& s, const std::int64_t* indices) {
  for (std::int64_t i = 0; i < s.count; ++i) {
    if (indices[i] < 0 || indices[i] >= s.num_embeddings) throw_embedding_index_error(i, indices[i], s.num_embeddings);
  }
}

constexpr std::int64_t kColumnBlock = 64;  // columns one thread owns in backward

}  // namespace

template <typename T>
void embedding_forward(const Context&, const EmbeddingShape& s, DType, const void* weight, const std::int64_t* indices,
                       void* output) {
  check_ids(s, indices);
  const T* table = static_cast<const T*>(weight);
  T* out = static_cast<T*>(output);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < s.count; ++i) {
    const T* row = table + indices[i] * s.dim;
    std::copy(row, row + s.dim, out + i * s.dim);
  }
}

template <typename T>
void embedding_backward(const Context&, const EmbeddingShape& s, DType, const void* grad_output,
                        const std::int64_t* indices, bool, void* grad_weight) {
  check_ids(s, indices);
  const T* grad = static_cast<const T*>(grad_output);
  T* table = static_cast<T*>(grad_weight);
  std::fill(table, table + s.num_embeddings * s.dim, T(0));
  const std::int64_t blocks = (s.dim + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * kColumnBlock, end = std::min(s.dim, begin + kColumnBlock);
    for (std::int64_t i = 0; i < s.count; ++i) {
      T* row = table + indices[i] * s.dim;
      const T* g = grad + i * s.dim;
      for (std::int64_t c = begin; c < end; ++c) row[c] += g[c];
    }
  }
}

#define SUBLET_INSTANTIATE_EMBEDDING_CPU(T)                                                                         \
  template void embedding_forward<T>(const Context&, const EmbeddingShape&, DType, const void*, const std::int64_t*, \
                                     void*);                                                                        \
  template void embedding_backward<T>(const Context&, const EmbeddingShape&, DType, const void*,                    \
                                      const std::int64_t*, bool, void*);
SUBLET_INSTANTIATE_EMBEDDING_CPU(float)
SUBLET_INSTANTIATE_EMBEDDING_CPU(double)
#undef SUBLET_INSTANTIATE_EMBEDDING_CPU

}  // namespace sublet::ops::cpu
