// Fused cross-entropy over large vocabularies. Forward: one block per row reads the logits once,
// keeping a running (maximum, sum of exponentials) per thread (the online softmax), combined in
// a fixed order; it writes the row's log-sum-exp and loss. A single block then averages the
// counted rows' losses in a fixed order (deterministic). Backward: one block per row reads the
// logits once more and writes the gradient in their dtype from the saved log-sum-exp.
// Both read (and the backward writes) the 16-byte-aligned middle of a row as 16-byte vectors and
// the few elements before and after it one at a time, so any class count and row offset works.
// float32 and the 16-bit types use the fast exponential (ex2.approx: a few float32 ulps, well
// inside the float32 accumulation's own error); float64 keeps exp.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/cross_entropy_cuda.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/index_check.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::cuda {
namespace {

constexpr int kRowThreads = 256;  // a power of two (block_combine)
constexpr std::uintptr_t kVectorBytes = 16;

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Elements of T in one 16-byte vector.
template <typename T>
constexpr int kVector = static_cast<int>(kVectorBytes / sizeof(T));

template <int N>
using Width = std::integral_constant<int, N>;

// exp(x - shift). float: ex2.approx of x * log2(e) - shift * log2(e), one FMA and one MUFU per
// value; rounding shift * log2(e) moves every value alike by |shift| * 2^-24 at most, the order
// of rounding the log-sum-exp itself to float32.
template <typename A>
struct ExpMinus {
  A shift;
  __device__ explicit ExpMinus(A s) : shift(std::is_same_v<A, float> ? -s * A(1.4426950408889634) : s) {}
  __device__ A operator()(A x) const {
    if constexpr (std::is_same_v<A, float>) {
      return exp2f(fmaf(x, 1.4426950408889634f, shift));
    } else {
      return exp(x - shift);
    }
  }
};

template <typename A>
__device__ A exp_of(A x) {
  return ExpMinus<A>(A(0))(x);
}

// Calls visit(j, Width<V>) for the vectors of this thread and visit(j, Width<1>) for its single
// elements. V > 1: the vectors cover the part of the row that starts on a 16-byte boundary (of
// `row`'s address) and holds whole vectors; the head before it and the tail after it (each fewer
// than V elements) go one by one. V = 1: every element alone.
template <int V, typename T, typename Visit>
__device__ void visit_row(const T* row, std::int64_t classes, Visit visit) {
  std::int64_t head = 0, body_end = classes;
  if constexpr (V > 1) {
    const std::uintptr_t offset = reinterpret_cast<std::uintptr_t>(row) % kVectorBytes;  // a multiple of sizeof(T)
    head = static_cast<std::int64_t>((kVectorBytes - offset) % kVectorBytes / sizeof(T));
    if (head > classes) head = classes;
    body_end = head + (classes - head) / V * V;
  }
  for (std::int64_t j = head + static_cast<std::int64_t>(threadIdx.x) * V; j < body_end; j += kRowThreads * V) {
    visit(j, Width<V>{});
  }
  if constexpr (V > 1) {
    if (threadIdx.x < head) visit(static_cast<std::int64_t>(threadIdx.x), Width<1>{});
    const std::int64_t tail = body_end + threadIdx.x;
    if (tail < classes) visit(tail, Width<1>{});
  }
}

// row[j .. j + N) in the accumulation type; N = 1 or one 16-byte vector.
template <int N, typename T>
__device__ void load_values(const T* row, std::int64_t j, Acc<T> (&x)[N]) {
  const Pack<T, N> pack = load_pack<T, N>(row, j);
#pragma unroll
  for (int k = 0; k < N; ++k) x[k] = static_cast<Acc<T>>(load_compute(pack.v[k]));
}

template <int N, typename T>
__device__ void store_values(T* row, std::int64_t j, const Acc<T> (&g)[N]) {
  if constexpr (kIsHalf<T>) {
    store_pack<T, N>(row, j, pack_from_floats<T, N>(g));
  } else {
    Pack<T, N> pack;
#pragma unroll
    for (int k = 0; k < N; ++k) pack.v[k] = g[k];
    store_pack<T, N>(row, j, pack);
  }
}

// A running log-sum-exp: sum of exp(x - max) over the values seen, where max is their largest
// (NaN aside). While max is -inf, sum is over exp(x - 0): 0, or NaN once a NaN was seen.
template <typename A>
struct MaxSum {
  A max;
  A sum;
};

// One rescale per call for the largest of the N values; a NaN makes the sum NaN (fmax skips it).
template <int N, typename A>
__device__ void add_values(MaxSum<A>& s, const A (&x)[N]) {
  A values_max = x[0];
#pragma unroll
  for (int k = 1; k < N; ++k) values_max = fmax(values_max, x[k]);
  const A m = fmax(s.max, values_max);
  if (m > s.max) s.sum *= exp_of(s.max - m);  // s.max -inf: exp(-inf) = 0 (a NaN sum stays NaN)
  s.max = m;
  const ExpMinus<A> exp_minus(m == -INFINITY ? A(0) : m);  // -inf - -inf would be NaN
  A added = 0;
#pragma unroll
  for (int k = 0; k < N; ++k) added += exp_minus(x[k]);
  s.sum += added;
}

template <typename A>
__device__ MaxSum<A> merge(MaxSum<A> a, MaxSum<A> b) {
  const A m = fmax(a.max, b.max);
  // The side holding the maximum keeps its sum as it is (also for two equal infinite maxima).
  const A a_sum = a.max == m ? a.sum : a.sum * exp_of(a.max - m);
  const A b_sum = b.max == m ? b.sum : b.sum * exp_of(b.max - m);
  return {m, a_sum + b_sum};
}

template <typename A>
__device__ A log_sum_exp_of(MaxSum<A> s) {
  if (s.max == -INFINITY) return isnan(s.sum) ? A(NAN) : s.max;  // all -inf; NaNs among them give NaN
  if (s.max == INFINITY) return s.max;                            // the shift below would give NaN
  return s.max + log(s.sum);
}

// kSmoothing: label smoothing is on, so the row's sum of logits is needed too.
template <typename T, bool kSmoothing>
__global__ void __launch_bounds__(kRowThreads)
    forward_rows(std::int64_t classes, const T* logits, const std::int64_t* targets, std::int64_t ignore_index,
                 Acc<T> smoothing, Acc<T>* row_lse, Acc<T>* row_loss) {
  using A = Acc<T>;
  __shared__ MaxSum<A> stats_scratch[kRowThreads];
  __shared__ A sum_scratch[kRowThreads];
  const std::int64_t n = blockIdx.x;
  const T* row = logits + n * classes;
  MaxSum<A> local{-INFINITY, A(0)};
  A local_sum = 0;  // of the logits, for label smoothing
  visit_row<kVector<T>>(row, classes, [&](std::int64_t j, auto width) {
    constexpr int N = decltype(width)::value;
    A x[N];
    load_values<N>(row, j, x);
    add_values<N>(local, x);
    if constexpr (kSmoothing) {
#pragma unroll
      for (int k = 0; k < N; ++k) local_sum += x[k];
    }
  });
  const MaxSum<A> stats = block_combine(local, stats_scratch, [](MaxSum<A> a, MaxSum<A> b) { return merge(a, b); });
  A logits_sum = 0;
  if constexpr (kSmoothing) logits_sum = block_combine(local_sum, sum_scratch, [](A a, A b) { return a + b; });
  if (threadIdx.x == 0) {
    const A lse = log_sum_exp_of(stats);
    row_lse[n] = lse;
    const std::int64_t t = targets[n];
    if (t == ignore_index) {
      row_loss[n] = 0;
    } else if (t < 0 || t >= classes) {
      row_loss[n] = NAN;  // a captured target check reports it after the replay (ops/cuda/index_check.h)
    } else {
      const A target_nll = lse - static_cast<A>(load_compute(row[t]));
      const A smooth_nll = lse - logits_sum / static_cast<A>(classes);  // mean over classes of -log p
      row_loss[n] = (A(1) - smoothing) * target_nll + (smoothing != A(0) ? smoothing * smooth_nll : A(0));
    }
  }
}

// loss = sum of the counted rows' losses / their count (one block, fixed order).
template <typename A>
__global__ void mean_over_counted(std::int64_t rows, const A* row_loss, const std::int64_t* targets,
                                  std::int64_t ignore_index, A* loss) {
  __shared__ A sum_scratch[kRowThreads];
  __shared__ long long count_scratch[kRowThreads];
  A total = 0;
  long long counted = 0;
  for (std::int64_t n = threadIdx.x; n < rows; n += blockDim.x) {
    total += row_loss[n];
    counted += targets[n] != ignore_index;
  }
  total = block_combine(total, sum_scratch, [](A a, A b) { return a + b; });
  counted = block_combine(counted, count_scratch, [](long long a, long long b) { return a + b; });
  if (threadIdx.x == 0) *loss = total / static_cast<A>(counted);  // 0/0 = NaN when all are ignored
}

template <typename A>
__global__ void count_counted(std::int64_t rows, const std::int64_t* targets, std::int64_t ignore_index, A* count) {
  __shared__ long long scratch[kRowThreads];
  long long counted = 0;
  for (std::int64_t n = threadIdx.x; n < rows; n += blockDim.x) counted += targets[n] != ignore_index;
  counted = block_combine(counted, scratch, [](long long a, long long b) { return a + b; });
  if (threadIdx.x == 0) *count = static_cast<A>(counted);
}

// V: kVector<T> when the logits and the gradient share their offset within 16 bytes (then every
// row of both splits alike), else 1.
template <typename T, int V>
__global__ void __launch_bounds__(kRowThreads)
    backward_rows(std::int64_t classes, const Acc<T>* grad_loss, const Acc<T>* count, const T* logits,
                  const std::int64_t* targets, const Acc<T>* row_lse, std::int64_t ignore_index, Acc<T> smoothing,
                  T* grad_logits) {
  using A = Acc<T>;
  const std::int64_t n = blockIdx.x;
  T* grad_row = grad_logits + n * classes;
  const std::int64_t t = targets[n];
  if (t == ignore_index) {
    visit_row<V>(grad_row, classes, [&](std::int64_t j, auto width) {
      constexpr int N = decltype(width)::value;
      const A zeros[N] = {};
      store_values<N>(grad_row, j, zeros);
    });
    return;
  }
  const T* row = logits + n * classes;
  const A scale = *grad_loss / *count;
  const A lse = row_lse[n];
  const A smooth_share = smoothing / static_cast<A>(classes);
  const ExpMinus<A> exp_minus(lse);
  visit_row<V>(row, classes, [&](std::int64_t j, auto width) {
    constexpr int N = decltype(width)::value;
    A x[N];
    load_values<N>(row, j, x);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const A target_share = (j + k == t ? A(1) - smoothing : A(0)) + smooth_share;
      x[k] = scale * (exp_minus(x[k]) - target_share);
    }
    store_values<N>(grad_row, j, x);
  });
}

void check_targets(const Context& ctx, const ClassScoresShape& s, const std::int64_t* targets,
                   std::int64_t ignore_index) {
  check_in_range(ctx, targets, Shape{s.batch}, Shape{1}, s.classes, ignore_index,
                 [classes = s.classes](const OutOfRange& bad) {
                   throw ValueError("cross_entropy: target " + std::to_string(bad.value) + " of sample " +
                                    std::to_string(bad.position) + " is outside [0, " + std::to_string(classes) + ")");
                 });
}

unsigned rows_grid(const ClassScoresShape& s) {
  if (s.batch > 0x7fffffff) throw ShapeError("cross_entropy: at most 2^31 - 1 rows per call on CUDA");
  return static_cast<unsigned>(s.batch);
}

}  // namespace

void cross_entropy_forward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* logits,
                           const std::int64_t* targets, const CrossEntropyParams& params, void* loss,
                           void* row_log_sum_exp) {
  dispatch_device_floating(dtype, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    check_targets(ctx, s, targets, params.ignore_index);
    memory::CudaDeviceGuard device(ctx.device);
    const cudaStream_t stream = stream_of(ctx.stream);
    auto per_row = ctx.workspace(static_cast<std::size_t>(s.batch) * sizeof(A));
    auto* row_loss = static_cast<A*>(per_row.get());
    auto* forward = params.label_smoothing != 0 ? forward_rows<T, true> : forward_rows<T, false>;
    forward<<<rows_grid(s), kRowThreads, 0, stream>>>(
        s.classes, static_cast<const T*>(logits), targets, params.ignore_index, static_cast<A>(params.label_smoothing),
        static_cast<A*>(row_log_sum_exp), row_loss);
    SUBLET_CUDA_LAUNCH_CHECK(cross_entropy_forward_rows);
    mean_over_counted<A><<<1, kRowThreads, 0, stream>>>(s.batch, row_loss, targets, params.ignore_index,
                                                        static_cast<A*>(loss));
    SUBLET_CUDA_LAUNCH_CHECK(cross_entropy_mean_over_counted);
  });
}

void cross_entropy_backward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* grad_loss,
                            const void* logits, const std::int64_t* targets, const void* row_log_sum_exp,
                            const CrossEntropyParams& params, void* grad_logits) {
  dispatch_device_floating(dtype, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    memory::CudaDeviceGuard device(ctx.device);
    const cudaStream_t stream = stream_of(ctx.stream);
    // The targets were checked by the forward call that produced row_log_sum_exp.
    auto count_block = ctx.workspace(sizeof(A));
    auto* count = static_cast<A*>(count_block.get());
    count_counted<A><<<1, kRowThreads, 0, stream>>>(s.batch, targets, params.ignore_index, count);
    SUBLET_CUDA_LAUNCH_CHECK(cross_entropy_count_counted);
    const bool same_offset = reinterpret_cast<std::uintptr_t>(logits) % kVectorBytes ==
                             reinterpret_cast<std::uintptr_t>(grad_logits) % kVectorBytes;
    auto* backward = same_offset ? backward_rows<T, kVector<T>> : backward_rows<T, 1>;
    backward<<<rows_grid(s), kRowThreads, 0, stream>>>(
        s.classes, static_cast<const A*>(grad_loss), count, static_cast<const T*>(logits), targets,
        static_cast<const A*>(row_log_sum_exp), params.ignore_index, static_cast<A>(params.label_smoothing),
        static_cast<T*>(grad_logits));
    SUBLET_CUDA_LAUNCH_CHECK(cross_entropy_backward_rows);
  });
}

}  // namespace sublet::ops::cuda
