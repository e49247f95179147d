#pragma once
// The one loop every strided CPU kernel uses. Dimensions that are contiguous for every operand
// are merged first, so a contiguous tensor becomes one long run and the inner loop vectorises;
// views (transposes, broadcasts) fall back to strided runs along the innermost dimension.
// Work is split into fixed chunks of linear indices for OpenMP, so results do not depend on the
// number of threads.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "ops/strided.h"

namespace sublet::ops::cpu {

// Below this many elements a kernel stays on one thread: the fork/join costs more than it saves.
inline constexpr std::int64_t kParallelGrain = 32768;

template <std::size_t N>
struct LoopShape {
  std::vector<std::int64_t> sizes;                    // outermost first
  std::vector<std::array<std::int64_t, N>> strides;   // per dimension, per operand
  std::int64_t numel = 0;
};

template <std::size_t N>
LoopShape<N> make_loop_shape(const Shape& sizes, const std::array<const Shape*, N>& strides) {
  LoopShape<N> loop;
  loop.numel = shape_numel(sizes);
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    std::array<std::int64_t, N> st{};
    for (std::size_t k = 0; k < N; ++k) st[k] = (*strides[k])[d];
    if (!loop.sizes.empty()) {
      bool mergeable = true;
      for (std::size_t k = 0; k < N; ++k) mergeable = mergeable && loop.strides.back()[k] == st[k] * sizes[d];
      if (mergeable) {
        loop.sizes.back() *= sizes[d];
        loop.strides.back() = st;
        continue;
      }
    }
    loop.sizes.push_back(sizes[d]);
    loop.strides.push_back(st);
  }
  if (loop.sizes.empty()) {
    loop.sizes.push_back(1);
    loop.strides.push_back({});
  }
  return loop;
}

// Calls body(offsets, count, inner_strides) for runs along the innermost dimension that cover the
// linear indices [begin, end); offsets are each operand's element offset at the run's start.
template <std::size_t N, typename Body>
void for_each_run(const LoopShape<N>& loop, std::int64_t begin, std::int64_t end, Body&& body) {
  const std::size_t nd = loop.sizes.size();
  std::vector<std::int64_t> index(nd, 0);
  std::array<std::int64_t, N> offset{};
  std::int64_t rest = begin;
  for (std::size_t d = nd; d-- > 0;) {
    index[d] = rest % loop.sizes[d];
    rest /= loop.sizes[d];
    for (std::size_t k = 0; k < N; ++k) offset[k] += index[d] * loop.strides[d][k];
  }
  const auto& inner = loop.strides[nd - 1];
  for (std::int64_t pos = begin; pos < end;) {
    const std::int64_t count = std::min(loop.sizes[nd - 1] - index[nd - 1], end - pos);
    body(offset, count, inner);
    pos += count;
    index[nd - 1] += count;
    for (std::size_t k = 0; k < N; ++k) offset[k] += count * inner[k];
    for (std::size_t d = nd - 1; d > 0 && index[d] == loop.sizes[d]; --d) {
      for (std::size_t k = 0; k < N; ++k) offset[k] += loop.strides[d - 1][k] - index[d] * loop.strides[d][k];
      index[d] = 0;
      ++index[d - 1];
    }
  }
}

template <std::size_t N, typename Body>
void parallel_for_each_run(const LoopShape<N>& loop, Body&& body) {
  const std::int64_t n = loop.numel;
  if (n <= 0) return;
  const std::int64_t chunks = (n + kParallelGrain - 1) / kParallelGrain;
  if (chunks <= 1) {
    for_each_run(loop, 0, n, body);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    for_each_run(loop, c * kParallelGrain, std::min(n, (c + 1) * kParallelGrain), body);
  }
}

// Element offset of the `linear`-th element (row-major order) of a strided shape.
inline std::int64_t strided_offset(std::int64_t linear, const Shape& sizes, const Shape& strides) {
  std::int64_t offset = 0;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    offset += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return offset;
}

}  // namespace sublet::ops::cpu
