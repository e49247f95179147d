#pragma once
// How a CUDA kernel finds the element offsets of N strided operands from a linear index over
// their common shape. Built on the host: dimensions of size 1 are dropped and dimensions that
// are contiguous for every operand are merged (as the CPU loop does), so a contiguous tensor
// becomes one dimension and the kernel takes its no-division fast path. Passed by value as a
// kernel argument (a few hundred bytes), so no device memory is needed for the geometry.
#include <array>
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "ops/strided.h"

namespace sublet::ops::cuda {

// More non-mergeable dimensions than this is a ShapeError; real views have far fewer.
inline constexpr int kMaxIndexerDims = 12;

template <int N>
struct StridedIndexer {
  int ndim = 0;
  bool unit_stride = false;  // one dimension, stride 1 for every operand: offset = linear index
  std::int64_t sizes[kMaxIndexerDims] = {};
  std::int64_t strides[kMaxIndexerDims][N] = {};

  // linear must be below the product of the sizes (every caller loops to numel): then what is
  // left of it after the inner dimensions is the outermost index, which needs no division.
  __host__ __device__ void offsets(std::int64_t linear, std::int64_t (&offset)[N]) const {
    if (unit_stride) {
      for (int k = 0; k < N; ++k) offset[k] = linear;
      return;
    }
    for (int k = 0; k < N; ++k) offset[k] = 0;
    for (int d = ndim - 1; d > 0; --d) {
      const std::int64_t size = sizes[d];
      const std::int64_t index = linear % size;
      linear /= size;
      for (int k = 0; k < N; ++k) offset[k] += index * strides[d][k];
    }
    for (int k = 0; k < N; ++k) offset[k] += linear * strides[0][k];
  }
  // The single-operand form, for readability at call sites.
  __host__ __device__ std::int64_t offset(std::int64_t linear) const {
    std::int64_t o[N];
    offsets(linear, o);
    return o[0];
  }
};

template <int N>
StridedIndexer<N> make_indexer(const Shape& sizes, const std::array<const Shape*, N>& strides) {
  for (int k = 0; k < N; ++k) {
    if (strides[k]->size() != sizes.size()) {
      throw ShapeError("cuda kernel: operand " + std::to_string(k) + " has " + std::to_string(strides[k]->size()) +
                       " strides for a " + std::to_string(sizes.size()) + "-d shape");
    }
  }
  StridedIndexer<N> ix;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (ix.ndim > 0) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k) mergeable = mergeable && ix.strides[ix.ndim - 1][k] == (*strides[k])[d] * sizes[d];
      if (mergeable) {
        ix.sizes[ix.ndim - 1] *= sizes[d];
        for (int k = 0; k < N; ++k) ix.strides[ix.ndim - 1][k] = (*strides[k])[d];
        continue;
      }
    }
    if (ix.ndim == kMaxIndexerDims) {
      throw ShapeError("cuda kernel: at most " + std::to_string(kMaxIndexerDims) +
                       " non-mergeable dimensions are supported, got a " + std::to_string(sizes.size()) +
                       "-d view with more (call contiguous() first)");
    }
    ix.sizes[ix.ndim] = sizes[d];
    for (int k = 0; k < N; ++k) ix.strides[ix.ndim][k] = (*strides[k])[d];
    ++ix.ndim;
  }
  if (ix.ndim == 0) {  // a single element
    ix.ndim = 1;
    ix.sizes[0] = 1;
  }
  bool unit = ix.ndim == 1;
  for (int k = 0; k < N; ++k) unit = unit && (ix.strides[0][k] == 1 || ix.sizes[0] == 1);
  ix.unit_stride = unit;
  return ix;
}

}  // namespace sublet::ops::cuda
