// Row softmax and log_softmax: one block per row; the maximum, then the sum of exponentials
// shifted by it, each combined by block_combine in a fixed order.
#include <cmath>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/softmax_cuda.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

constexpr int kRowThreads = 256;  // a power of two (block_combine)

// double for float32 rows, as the CPU kernels sum in double; float32 for 16-bit rows.
template <typename T>
using RowAcc = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, double, float>;

template <typename T>
__device__ RowAcc<T> load(const T* p, std::int64_t i) {
  return static_cast<RowAcc<T>>(load_compute(p[i]));
}

template <typename T>
__device__ T store(RowAcc<T> v) {
  return store_compute<T>(static_cast<ComputeType<T>>(v));
}

// The row's maximum and log-sum-exp; an infinite maximum is its own log-sum-exp (the shift
// would give NaN), as the CPU kernel.
template <typename T>
__device__ void row_stats(const T* row, std::int64_t cols, RowAcc<T>* scratch, RowAcc<T>& max, RowAcc<T>& sum) {
  using Acc = RowAcc<T>;
  Acc local_max = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) local_max = fmax(local_max, load(row, j));
  max = block_combine(local_max, scratch, [](Acc a, Acc b) { return fmax(a, b); });
  Acc local_sum = 0;
  if (!isinf(max)) {
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) local_sum += exp(load(row, j) - max);
  }
  sum = block_combine(local_sum, scratch, [](Acc a, Acc b) { return a + b; });
}

template <typename T, bool kLog>
__global__ void forward_kernel(std::int64_t cols, const T* input, T* output) {
  using Acc = RowAcc<T>;
  __shared__ Acc scratch[kRowThreads];
  const T* row = input + static_cast<std::int64_t>(blockIdx.x) * cols;
  T* out = output + static_cast<std::int64_t>(blockIdx.x) * cols;
  Acc max, sum;
  row_stats(row, cols, scratch, max, sum);
  if constexpr (kLog) {
    const Acc lse = isinf(max) ? max : max + log(sum);
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = store<T>(load(row, j) - lse);
  } else {
    const Acc inv = Acc(1) / sum;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = store<T>(exp(load(row, j) - max) * inv);
  }
}

// softmax: grad_in = y * (g - sum(g * y)); log_softmax: grad_in = g - exp(y) * sum(g).
template <typename T, bool kLog>
__global__ void backward_kernel(std::int64_t cols, const T* grad_output, const T* output, T* grad_input) {
  using Acc = RowAcc<T>;
  __shared__ Acc scratch[kRowThreads];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * cols;
  const T* g = grad_output + base;
  const T* y = output + base;
  Acc local = 0;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) local += kLog ? load(g, j) : load(g, j) * load(y, j);
  const Acc total = block_combine(local, scratch, [](Acc a, Acc b) { return a + b; });
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const Acc v = kLog ? load(g, j) - exp(load(y, j)) * total : load(y, j) * (load(g, j) - total);
    grad_input[base + j] = store<T>(v);
  }
}

unsigned rows_grid(const char* op, const ClassScoresShape& s) {
  if (s.batch > 0x7fffffff) throw ShapeError(std::string(op) + ": at most 2^31 - 1 rows per call on CUDA");
  return static_cast<unsigned>(s.batch);
}

template <bool kLog>
void forward(const char* op, const Context& ctx, const ClassScoresShape& s, DType dtype, const void* input,
             void* output) {
  if (s.batch == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_floating(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T, kLog><<<rows_grid(op, s), kRowThreads, 0, stream_of(ctx.stream)>>>(
        s.classes, static_cast<const T*>(input), static_cast<T*>(output));
    SUBLET_CUDA_LAUNCH_CHECK(softmax_forward_kernel);
  });
}

template <bool kLog>
void backward(const char* op, const Context& ctx, const ClassScoresShape& s, DType dtype, const void* grad_output,
              const void* output, void* grad_input) {
  if (s.batch == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_floating(dtype, op, [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T, kLog><<<rows_grid(op, s), kRowThreads, 0, stream_of(ctx.stream)>>>(
        s.classes, static_cast<const T*>(grad_output), static_cast<const T*>(output), static_cast<T*>(grad_input));
    SUBLET_CUDA_LAUNCH_CHECK(softmax_backward_kernel);
  });
}

}  // namespace

void softmax_forward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* input, void* output) {
  forward<false>("softmax", ctx, s, dtype, input, output);
}
void softmax_backward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* grad_output,
                      const void* output, void* grad_input) {
  backward<false>("softmax_backward", ctx, s, dtype, grad_output, output, grad_input);
}
void log_softmax_forward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* input, void* output) {
  forward<true>("log_softmax", ctx, s, dtype, input, output);
}
void log_softmax_backward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* grad_output,
                          const void* output, void* grad_input) {
  backward<true>("log_softmax_backward", ctx, s, dtype, grad_output, output, grad_input);
}

}  // namespace sublet::ops::cuda
