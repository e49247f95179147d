// Sum, max/min with indices, scatter_add and gather. A sum over the leading dimensions of a
// row-major layout (a bias gradient) takes the column kernel (ops/cuda/reduce_columns.cu).
// Semantics follow ops/cpu/reduce_cpu.cpp: float sums accumulate in double, int64 sums in int64; max/min return the first index of the
// extremum and a NaN beats every number (the first NaN wins). Sums are deterministic (fixed
// tree order) but their rounding order differs from the CPU's sequential loop, hence the
// tolerance in the tests; max/min, gather and scatter_add agree with the CPU bit for bit
// (scatter_add: one thread per output row adds in the same order as the CPU loop).
// bfloat16 and float16 (ops/cuda/half_types.cuh) accumulate in float32, as PyTorch's CUDA sums
// do, and the sum or mean is rounded once to the input's dtype (the output dtype, as PyTorch's
// sum/mean of a 16-bit tensor); max/min compare in float32 and return the input's element;
// scatter_add adds in float32 and rounds each sum to 16 bits.
#include <climits>
#include <type_traits>

#include "ops/cpu/dtype_dispatch.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/device_math.cuh"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/index_check.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/reduce_columns.h"
#include "ops/cuda/reduce_cuda.h"
#include "ops/cuda/reduce_plan.h"
#include "ops/cuda/strided_indexer.cuh"
#include "ops/cuda/sum_accumulator.cuh"

namespace sublet::ops::cuda {
namespace {

constexpr int kReduceThreads = 256;  // a power of two (block_combine)

// Many short reductions: one thread each.
template <typename T>
__global__ void sum_per_thread(StridedIndexer<1> outer, StridedIndexer<1> inner, std::int64_t outer_n,
                               std::int64_t inner_n, const T* in, T* out, double scale) {
  for (std::int64_t o = global_thread_index(); o < outer_n; o += grid_threads()) {
    const T* base = in + outer.offset(o);
    Accumulator<T> acc = 0;
    for (std::int64_t i = 0; i < inner_n; ++i) acc += load_compute(base[inner.offset(i)]);
    out[o] = finish_sum<T>(acc, scale);
  }
}

// Long reductions: block b sums chunk (b % chunks) of output (b / chunks). With one chunk the
// block writes the output; with more it writes a partial that sum_partials adds in order.
template <typename T>
__global__ void sum_per_block(StridedIndexer<1> outer, StridedIndexer<1> inner, std::int64_t inner_n,
                              std::int64_t chunk_len, std::int64_t chunks, const T* in,
                              Accumulator<T>* partial, T* out, double scale) {
  __shared__ Accumulator<T> scratch[kReduceThreads];
  const std::int64_t block = blockIdx.x;
  const std::int64_t o = block / chunks, c = block % chunks;
  const T* base = in + outer.offset(o);
  const std::int64_t begin = c * chunk_len;
  const std::int64_t end = begin + chunk_len < inner_n ? begin + chunk_len : inner_n;
  Accumulator<T> acc = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += load_compute(base[inner.offset(i)]);
  acc = block_combine(acc, scratch, [](Accumulator<T> x, Accumulator<T> y) { return x + y; });
  if (threadIdx.x == 0) {
    if (chunks == 1) {
      out[o] = finish_sum<T>(acc, scale);
    } else {
      partial[block] = acc;
    }
  }
}

template <typename T>
__global__ void sum_partials(std::int64_t outer_n, std::int64_t chunks, const Accumulator<T>* partial, T* out,
                             double scale) {
  for (std::int64_t o = global_thread_index(); o < outer_n; o += grid_threads()) {
    Accumulator<T> acc = 0;
    for (std::int64_t c = 0; c < chunks; ++c) acc += partial[o * chunks + c];
    out[o] = finish_sum<T>(acc, scale);
  }
}

// Does candidate (v, i) replace the current best (bv, bi)? The order the CPU's left-to-right
// scan produces, made symmetric so that any combination order gives the same winner:
// the first NaN, else the first extremum.
template <typename T>
__device__ bool beats(ExtremumKind kind, T v, std::int64_t i, T bv, std::int64_t bi) {
  const bool v_nan = device_isnan(v), b_nan = device_isnan(bv);
  if (v_nan || b_nan) return v_nan && b_nan ? i < bi : v_nan;
  if (v == bv) return i < bi;
  return kind == ExtremumKind::Max ? v > bv : v < bv;
}

template <typename C>
struct Candidate {
  C value;  // in the compute type: float32 for the 16-bit types
  std::int64_t index;
};

template <typename T>
__global__ void extremum_per_thread(ExtremumKind kind, StridedIndexer<1> outer, std::int64_t outer_n, std::int64_t n,
                                    std::int64_t stride, const T* in, T* values, std::int64_t* indices) {
  for (std::int64_t o = global_thread_index(); o < outer_n; o += grid_threads()) {
    const T* p = in + outer.offset(o);
    ComputeType<T> best = load_compute(p[0]);
    std::int64_t best_index = 0;
    for (std::int64_t i = 1; i < n; ++i) {
      const ComputeType<T> v = load_compute(p[i * stride]);
      if (beats(kind, v, i, best, best_index)) {
        best = v;
        best_index = i;
      }
    }
    values[o] = store_compute<T>(best);
    indices[o] = best_index;
  }
}

template <typename T>
__global__ void extremum_per_block(ExtremumKind kind, StridedIndexer<1> outer, std::int64_t n, std::int64_t stride,
                                   const T* in, T* values, std::int64_t* indices) {
  using C = ComputeType<T>;
  __shared__ Candidate<C> scratch[kReduceThreads];
  const std::int64_t o = blockIdx.x;
  const T* p = in + outer.offset(o);
  Candidate<C> best{load_compute(p[0]), 0};
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const C v = load_compute(p[i * stride]);
    if (beats(kind, v, i, best.value, best.index)) best = {v, i};
  }
  best = block_combine(best, scratch, [kind](Candidate<C> a, Candidate<C> b) {
    return beats(kind, b.value, b.index, a.value, a.index) ? b : a;
  });
  if (threadIdx.x == 0) {
    values[o] = store_compute<T>(best.value);
    indices[o] = best.index;
  }
}

// One thread per outer position, walking the indexed dimension in order like the CPU: two
// positions never write the same element, and each element's additions keep the CPU's order.
template <typename T>
__global__ void scatter_add_kernel(StridedIndexer<3> outer, std::int64_t outer_n, std::int64_t index_count,
                                   std::int64_t out_dim_stride, std::int64_t index_dim_stride,
                                   std::int64_t src_dim_stride, T* out, const std::int64_t* indices, const T* src) {
  for (std::int64_t o = global_thread_index(); o < outer_n; o += grid_threads()) {
    std::int64_t off[3];
    outer.offsets(o, off);
    for (std::int64_t j = 0; j < index_count; ++j) {
      const std::int64_t index = indices[off[1] + j * index_dim_stride];
      T& target = out[off[0] + index * out_dim_stride];
      target = store_compute<T>(load_compute(target) + load_compute(src[off[2] + j * src_dim_stride]));
    }
  }
}

template <typename T>
__global__ void gather_kernel(StridedIndexer<2> outer, std::int64_t numel, std::int64_t index_count,
                              std::int64_t in_dim_stride, std::int64_t index_dim_stride, T* out,
                              const std::int64_t* indices, const T* in) {
  for (std::int64_t e = global_thread_index(); e < numel; e += grid_threads()) {
    const std::int64_t o = e / index_count, j = e % index_count;
    std::int64_t off[2];
    outer.offsets(o, off);
    out[e] = in[off[0] + indices[off[1] + j * index_dim_stride] * in_dim_stride];
  }
}

Shape head(const Shape& strides, std::size_t count) { return Shape(strides.begin(), strides.begin() + count); }

// Throws the CPU kernel's ValueError when an index is outside the indexed dimension.
void check_indices(const Context& ctx, const char* op, const ScatterGeometry& g, const std::int64_t* indices) {
  Shape sizes = g.outer_sizes;
  sizes.push_back(g.index_count);
  check_in_range(ctx, indices, sizes, g.index_strides, g.out_dim_size, std::nullopt,
                 [name = std::string(op), size = g.out_dim_size](const OutOfRange& bad) {
                   throw ValueError(name + ": index " + std::to_string(bad.value) +
                                    " is out of range for a dimension of size " + std::to_string(size));
                 });
}

}  // namespace

void reduce_sum(const Context& ctx, DType dtype, const ReduceGeometry& g, void* out, const void* in, double scale) {
  const std::int64_t outer_n = shape_numel(g.outer_sizes);
  const std::int64_t inner_n = shape_numel(g.inner_sizes);
  if (outer_n == 0) return;
  const ColumnPlan columns = plan_columns(g);
  if (columns.applies) {
    sum_columns(ctx, dtype, columns, out, in, scale);
    return;
  }
  const auto outer = make_indexer<1>(g.outer_sizes, {&g.outer_strides});
  const auto inner = make_indexer<1>(g.inner_sizes, {&g.inner_strides});
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(in);
    // Few outputs over many elements: split each reduction into chunks so the GPU fills up.
    std::int64_t chunks = 1;
    if (inner_n > 65536 && outer_n < 2048) {
      chunks = std::min<std::int64_t>((inner_n + 16383) / 16384, std::max<std::int64_t>(1, 2048 / outer_n));
    }
    if (inner_n <= 32 || outer_n * chunks > INT_MAX) {
      sum_per_thread<T><<<grid_for(outer_n), kBlockThreads, 0, stream>>>(outer, inner, outer_n, inner_n, x, o, scale);
      SUBLET_CUDA_LAUNCH_CHECK(sum_per_thread);
      return;
    }
    const std::int64_t chunk_len = (inner_n + chunks - 1) / chunks;
    memory::ScopedBlock partial;
    if (chunks > 1) partial = ctx.workspace(static_cast<std::size_t>(outer_n * chunks) * sizeof(Accumulator<T>));
    auto* partial_ptr = static_cast<Accumulator<T>*>(partial.get());
    sum_per_block<T><<<static_cast<unsigned>(outer_n * chunks), kReduceThreads, 0, stream>>>(
        outer, inner, inner_n, chunk_len, chunks, x, partial_ptr, o, scale);
    SUBLET_CUDA_LAUNCH_CHECK(sum_per_block);
    if (chunks > 1) {
      sum_partials<T><<<grid_for(outer_n), kBlockThreads, 0, stream>>>(outer_n, chunks, partial_ptr, o, scale);
      SUBLET_CUDA_LAUNCH_CHECK(sum_partials);
    }
  });
}

void reduce_extremum(const Context& ctx, ExtremumKind kind, DType dtype, const ReduceGeometry& g, void* values,
                     std::int64_t* indices, const void* in) {
  const std::int64_t outer_n = shape_numel(g.outer_sizes);
  const std::int64_t n = g.inner_sizes.at(0);
  const std::int64_t stride = g.inner_strides.at(0);
  const char* name = kind == ExtremumKind::Max ? "max" : "min";
  if (outer_n == 0) return;
  if (n < 1) throw ShapeError(std::string(name) + ": cannot reduce over an empty dimension");
  const auto outer = make_indexer<1>(g.outer_sizes, {&g.outer_strides});
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(in);
    T* v = static_cast<T*>(values);
    if (n <= 64 || outer_n > INT_MAX) {
      extremum_per_thread<T><<<grid_for(outer_n), kBlockThreads, 0, stream>>>(kind, outer, outer_n, n, stride, x, v,
                                                                              indices);
      SUBLET_CUDA_LAUNCH_CHECK(extremum_per_thread);
    } else {
      extremum_per_block<T><<<static_cast<unsigned>(outer_n), kReduceThreads, 0, stream>>>(kind, outer, n, stride, x,
                                                                                           v, indices);
      SUBLET_CUDA_LAUNCH_CHECK(extremum_per_block);
    }
  });
}

void scatter_add(const Context& ctx, DType dtype, const ScatterGeometry& g, void* out, const std::int64_t* indices,
                 const void* src) {
  const std::int64_t outer_n = shape_numel(g.outer_sizes);
  if (outer_n == 0 || g.index_count == 0) return;
  check_indices(ctx, "scatter_add", g, indices);
  const std::size_t nd = g.outer_sizes.size();
  const Shape index_outer = head(g.index_strides, nd), src_outer = head(g.src_strides, nd);
  const auto outer = make_indexer<3>(g.outer_sizes, {&g.out_outer_strides, &index_outer, &src_outer});
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    scatter_add_kernel<T><<<grid_for(outer_n), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        outer, outer_n, g.index_count, g.out_dim_stride, g.index_strides[nd], g.src_strides[nd], static_cast<T*>(out),
        indices, static_cast<const T*>(src));
    SUBLET_CUDA_LAUNCH_CHECK(scatter_add_kernel);
  });
}

void gather(const Context& ctx, DType dtype, const ScatterGeometry& g, void* out, const std::int64_t* indices,
            const void* in) {
  const std::int64_t outer_n = shape_numel(g.outer_sizes);
  const std::int64_t numel = outer_n * g.index_count;
  if (numel == 0) return;
  check_indices(ctx, "gather", g, indices);
  const std::size_t nd = g.outer_sizes.size();
  const Shape index_outer = head(g.index_strides, nd);
  const auto outer = make_indexer<2>(g.outer_sizes, {&g.out_outer_strides, &index_outer});
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        outer, numel, g.index_count, g.out_dim_stride, g.index_strides[nd], static_cast<T*>(out), indices,
        static_cast<const T*>(in));
    SUBLET_CUDA_LAUNCH_CHECK(gather_kernel);
  });
}

}  // namespace sublet::ops::cuda
