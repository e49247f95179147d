#include "ops/cpu/reduce_cpu.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "core/errors.h"
#include "ops/cpu/strided_loop.h"

namespace sublet::ops::cpu {
namespace {

template <typename T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;

template <typename T>
Accumulator<T> sum_range(const T* base, const LoopShape<1>& inner, std::int64_t begin, std::int64_t end) {
  Accumulator<T> acc = 0;
  for_each_run(inner, begin, end, [&](const auto& off, std::int64_t n, const auto& st) {
    const T* p = base + off[0];
    const std::int64_t s = st[0];
    if (s == 1) {
      // Four independent partial sums break the add-latency chain; the order stays fixed.
      Accumulator<T> a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      std::int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        a0 += p[i];
        a1 += p[i + 1];
        a2 += p[i + 2];
        a3 += p[i + 3];
      }
      for (; i < n; ++i) a0 += p[i];
      acc += (a0 + a1) + (a2 + a3);
      return;
    }
    for (std::int64_t i = 0; i < n; ++i) acc += p[i * s];
  });
  return acc;
}

template <typename T>
void sum_typed(const ReduceGeometry& g, T* out, const T* in, double scale) {
  const std::int64_t outer = shape_numel(g.outer_sizes);
  auto inner = make_loop_shape<1>(g.inner_sizes, {&g.inner_strides});
  const std::int64_t inner_n = inner.numel;
  auto finish = [scale](Accumulator<T> acc) {
    return scale == 1.0 ? static_cast<T>(acc) : static_cast<T>(static_cast<double>(acc) * scale);
  };
  // Kept elements adjacent in memory (e.g. summing a [batch, features] gradient over the batch):
  // add whole rows into a block of accumulators instead of walking each strided column.
  auto outer_loop = make_loop_shape<1>(g.outer_sizes, {&g.outer_strides});
  if (outer_loop.sizes.size() == 1 && outer_loop.strides[0][0] == 1 && outer >= 16 && inner_n > 1) {
    constexpr std::int64_t kBlock = 512;
    const std::int64_t blocks = (outer + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (outer * inner_n > kParallelGrain && blocks >= 2)
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const std::int64_t begin = blk * kBlock, count = std::min(kBlock, outer - begin);
      Accumulator<T> acc[kBlock] = {};
      for_each_run(inner, 0, inner_n, [&](const auto& off, std::int64_t n, const auto& st) {
        for (std::int64_t i = 0; i < n; ++i) {
          const T* row = in + off[0] + i * st[0] + begin;
          for (std::int64_t o = 0; o < count; ++o) acc[o] += row[o];
        }
      });
      for (std::int64_t o = 0; o < count; ++o) out[begin + o] = finish(acc[o]);
    }
    return;
  }
  if (outer >= 2 || inner_n <= kParallelGrain) {
#pragma omp parallel for schedule(static) if (outer * inner_n > kParallelGrain && outer >= 2)
    for (std::int64_t o = 0; o < outer; ++o) {
      const T* base = in + strided_offset(o, g.outer_sizes, g.outer_strides);
      out[o] = finish(sum_range(base, inner, 0, inner_n));
    }
    return;
  }
  // One large reduction: fixed chunks summed in parallel, partials added in order.
  const std::int64_t chunks = (inner_n + kParallelGrain - 1) / kParallelGrain;
  std::vector<Accumulator<T>> partial(chunks);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    partial[c] = sum_range(in, inner, c * kParallelGrain, std::min(inner_n, (c + 1) * kParallelGrain));
  }
  Accumulator<T> acc = 0;
  for (auto p : partial) acc += p;
  out[0] = finish(acc);
}

template <typename T>
bool better(ExtremumKind kind, T candidate, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(candidate)) return true;
  }
  return kind == ExtremumKind::Max ? candidate > best : candidate < best;
}

template <typename T>
void extremum_typed(ExtremumKind kind, const ReduceGeometry& g, T* values, std::int64_t* indices, const T* in) {
  const std::int64_t outer = shape_numel(g.outer_sizes);
  const std::int64_t n = g.inner_sizes.at(0);
  const std::int64_t s = g.inner_strides.at(0);
#pragma omp parallel for schedule(static) if (outer * n > kParallelGrain)
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* p = in + strided_offset(o, g.outer_sizes, g.outer_strides);
    T best = p[0];
    std::int64_t best_index = 0;
    for (std::int64_t i = 1; i < n; ++i) {
      if (better(kind, p[i * s], best)) {
        best = p[i * s];
        best_index = i;
      }
    }
    values[o] = best;
    indices[o] = best_index;
  }
}

// Checked before the parallel loops: an exception must not leave an OpenMP region.
void check_indices(const char* op, const ScatterGeometry& g, const std::int64_t* indices) {
  const std::int64_t outer = shape_numel(g.outer_sizes);
  const std::size_t nd = g.outer_sizes.size();
  const Shape index_outer(g.index_strides.begin(), g.index_strides.begin() + nd);
  for (std::int64_t o = 0; o < outer; ++o) {
    const std::int64_t* pi = indices + strided_offset(o, g.outer_sizes, index_outer);
    for (std::int64_t j = 0; j < g.index_count; ++j) {
      const std::int64_t index = pi[j * g.index_strides[nd]];
      if (index < 0 || index >= g.out_dim_size) {
        throw ValueError(std::string(op) + ": index " + std::to_string(index) +
                         " is out of range for a dimension of size " + std::to_string(g.out_dim_size));
      }
    }
  }
}

template <typename T>
void scatter_typed(const ScatterGeometry& g, T* out, const std::int64_t* indices, const T* src) {
  check_indices("scatter_add", g, indices);
  const std::int64_t outer = shape_numel(g.outer_sizes);
  const std::size_t nd = g.outer_sizes.size();
  const Shape index_outer(g.index_strides.begin(), g.index_strides.begin() + nd);
  const Shape src_outer(g.src_strides.begin(), g.src_strides.begin() + nd);
  // Different outer positions never write the same element, so splitting over them is safe.
#pragma omp parallel for schedule(static) if (outer * g.index_count > kParallelGrain)
  for (std::int64_t o = 0; o < outer; ++o) {
    T* po = out + strided_offset(o, g.outer_sizes, g.out_outer_strides);
    const std::int64_t* pi = indices + strided_offset(o, g.outer_sizes, index_outer);
    const T* ps = src + strided_offset(o, g.outer_sizes, src_outer);
    for (std::int64_t j = 0; j < g.index_count; ++j) {
      const std::int64_t index = pi[j * g.index_strides[nd]];
      po[index * g.out_dim_stride] += ps[j * g.src_strides[nd]];
    }
  }
}

template <typename T>
void gather_typed(const ScatterGeometry& g, T* out, const std::int64_t* indices, const T* in) {
  check_indices("gather", g, indices);
  const std::int64_t outer = shape_numel(g.outer_sizes);
  const std::size_t nd = g.outer_sizes.size();
  const Shape index_outer(g.index_strides.begin(), g.index_strides.begin() + nd);
#pragma omp parallel for schedule(static) if (outer * g.index_count > kParallelGrain)
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* pin = in + strided_offset(o, g.outer_sizes, g.out_outer_strides);
    const std::int64_t* pi = indices + strided_offset(o, g.outer_sizes, index_outer);
    T* po = out + o * g.index_count;
    for (std::int64_t j = 0; j < g.index_count; ++j) {
      const std::int64_t index = pi[j * g.index_strides[nd]];
      po[j] = pin[index * g.out_dim_stride];
    }
  }
}

}  // namespace

template <typename T>
void reduce_sum(const Context&, DType, const ReduceGeometry& geometry, void* out, const void* in, double scale) {
  sum_typed<T>(geometry, static_cast<T*>(out), static_cast<const T*>(in), scale);
}

template <typename T>
void reduce_extremum(const Context&, ExtremumKind kind, DType, const ReduceGeometry& geometry, void* values,
                     std::int64_t* indices, const void* in) {
  extremum_typed<T>(kind, geometry, static_cast<T*>(values), indices, static_cast<const T*>(in));
}

template <typename T>
void scatter_add(const Context&, DType, const ScatterGeometry& geometry, void* out, const std::int64_t* indices,
                 const void* src) {
  scatter_typed<T>(geometry, static_cast<T*>(out), indices, static_cast<const T*>(src));
}

template <typename T>
void gather(const Context&, DType, const ScatterGeometry& geometry, void* out, const std::int64_t* indices,
            const void* in) {
  gather_typed<T>(geometry, static_cast<T*>(out), indices, static_cast<const T*>(in));
}

#define SUBLET_INSTANTIATE_REDUCE(T)                                                                            \
  template void reduce_sum<T>(const Context&, DType, const ReduceGeometry&, void*, const void*, double);        \
  template void reduce_extremum<T>(const Context&, ExtremumKind, DType, const ReduceGeometry&, void*,           \
                                   std::int64_t*, const void*);                                                 \
  template void scatter_add<T>(const Context&, DType, const ScatterGeometry&, void*, const std::int64_t*,        \
                               const void*);                                                                    \
  template void gather<T>(const Context&, DType, const ScatterGeometry&, void*, const std::int64_t*, const void*);
SUBLET_INSTANTIATE_REDUCE(float)
SUBLET_INSTANTIATE_REDUCE(double)
SUBLET_INSTANTIATE_REDUCE(std::int64_t)
#undef SUBLET_INSTANTIATE_REDUCE

}  // namespace sublet::ops::cpu
