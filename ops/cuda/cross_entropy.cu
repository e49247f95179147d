// Fused cross-entropy over large vocabularies. Forward: one block per row reads the logits once,
// keeping a running (maximum, sum of exponentials) per thread (the online softmax), combined in
// a fixed order; it writes the row's log-sum-exp and loss. A single block then averages the
// counted rows' losses in a fixed order (deterministic). Backward: one block per row reads the
// logits once more and writes the gradient in their dtype from the saved log-sum-exp.
#include <cmath>
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

namespace sublet::ops::cuda {
namespace {

constexpr int kRowThreads = 256;  // a power of two (block_combine)

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__device__ Acc<T> load(const T* p, std::int64_t i) {
  return static_cast<Acc<T>>(load_compute(p[i]));
}

// A running log-sum-exp: sum of exp(x - max) over the values seen.
template <typename A>
struct MaxSum {
  A max;
  A sum;
};

template <typename A>
__device__ MaxSum<A> add_value(MaxSum<A> s, A x) {
  if (x == -INFINITY) return s;  // adds exp(-inf) = 0; the shift below would give NaN
  if (x > s.max) return {x, s.sum * exp(s.max - x) + A(1)};
  return {s.max, s.sum + exp(x - s.max)};  // NaN x: NaN sum, as it should
}

template <typename A>
__device__ MaxSum<A> merge(MaxSum<A> a, MaxSum<A> b) {
  if (a.max == -INFINITY) return b;
  if (b.max == -INFINITY) return a;
  const A m = fmax(a.max, b.max);
  return {m, a.sum * exp(a.max - m) + b.sum * exp(b.max - m)};
}

template <typename T>
__global__ void forward_rows(std::int64_t classes, const T* logits, const std::int64_t* targets,
                             std::int64_t ignore_index, Acc<T> smoothing, Acc<T>* row_lse, Acc<T>* row_loss) {
  using A = Acc<T>;
  __shared__ MaxSum<A> stats_scratch[kRowThreads];
  __shared__ A sum_scratch[kRowThreads];
  const std::int64_t n = blockIdx.x;
  const T* row = logits + n * classes;
  MaxSum<A> local{-INFINITY, A(0)};
  A local_sum = 0;  // of the logits, for label smoothing
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    const A x = load(row, j);
    local = add_value(local, x);
    local_sum += x;
  }
  const MaxSum<A> stats = block_combine(local, stats_scratch, [](MaxSum<A> a, MaxSum<A> b) { return merge(a, b); });
  A logits_sum = 0;
  if (smoothing != A(0)) logits_sum = block_combine(local_sum, sum_scratch, [](A a, A b) { return a + b; });
  if (threadIdx.x == 0) {
    // An all -inf row (max -inf) or a +inf maximum: the log-sum-exp is the maximum itself.
    const A lse = isinf(stats.max) ? stats.max : stats.max + log(stats.sum);
    row_lse[n] = lse;
    const std::int64_t t = targets[n];
    if (t == ignore_index) {
      row_loss[n] = 0;
    } else if (t < 0 || t >= classes) {
      row_loss[n] = NAN;  // a captured target check reports it after the replay (ops/cuda/index_check.h)
    } else {
      const A target_nll = lse - load(row, t);
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

template <typename T>
__global__ void backward_rows(std::int64_t classes, const Acc<T>* grad_loss, const Acc<T>* count, const T* logits,
                              const std::int64_t* targets, const Acc<T>* row_lse, std::int64_t ignore_index,
                              Acc<T> smoothing, T* grad_logits) {
  using A = Acc<T>;
  const std::int64_t n = blockIdx.x;
  T* grad_row = grad_logits + n * classes;
  const std::int64_t t = targets[n];
  if (t == ignore_index) {
    for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) grad_row[j] = store_compute<T>(0);
    return;
  }
  const T* row = logits + n * classes;
  const A scale = *grad_loss / *count;
  const A lse = row_lse[n];
  const A smooth_share = smoothing / static_cast<A>(classes);
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    const A target_share = (j == t ? A(1) - smoothing : A(0)) + smooth_share;
    grad_row[j] = store_compute<T>(static_cast<ComputeType<T>>(scale * (exp(load(row, j) - lse) - target_share)));
  }
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
    forward_rows<T><<<rows_grid(s), kRowThreads, 0, stream>>>(
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
    backward_rows<T><<<rows_grid(s), kRowThreads, 0, stream>>>(
        s.classes, static_cast<const A*>(grad_loss), count, static_cast<const T*>(logits), targets,
        static_cast<const A*>(row_log_sum_exp), params.ignore_index, static_cast<A>(params.label_smoothing),
        static_cast<T*>(grad_logits));
    SUBLET_CUDA_LAUNCH_CHECK(cross_entropy_backward_rows);
  });
}

}  // namespace sublet::ops::cuda
