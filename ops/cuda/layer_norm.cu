// Layer norm kernels. Row statistics take two passes over the row (the mean, then the squared
// deviations from it), which the row's second read finds in cache, and avoid the cancellation
// of E[x^2] - E[x]^2 for rows far from zero.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/layer_norm_cuda.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

constexpr int kRowThreads = 256;     // a power of two (block_combine)
constexpr int kColumnThreads = 256;  // columns per block of the weight/bias gradient
constexpr std::int64_t kRowsPerTile = 64;

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
__device__ Acc<T> load(const T* p, std::int64_t i) {
  return static_cast<Acc<T>>(load_compute(p[i]));
}

template <typename T>
__device__ T store(Acc<T> v) {
  return store_compute<T>(static_cast<ComputeType<T>>(v));
}

template <typename T>
__global__ void forward_rows(std::int64_t cols, const T* input, const T* weight, const T* bias, Acc<T> eps, T* output,
                             Acc<T>* mean_out, Acc<T>* rstd_out) {
  using A = Acc<T>;
  __shared__ A scratch[kRowThreads];
  const std::int64_t r = blockIdx.x;
  const T* x = input + r * cols;
  T* y = output + r * cols;
  A local = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) local += load(x, c);
  const A mean = block_combine(local, scratch, [](A a, A b) { return a + b; }) / static_cast<A>(cols);
  local = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A d = load(x, c) - mean;
    local += d * d;
  }
  const A var = block_combine(local, scratch, [](A a, A b) { return a + b; }) / static_cast<A>(cols);
  const A rstd = A(1) / sqrt(var + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    A v = (load(x, c) - mean) * rstd;
    if (weight != nullptr) v *= load(weight, c);
    if (bias != nullptr) v += load(bias, c);
    y[c] = store<T>(v);
  }
  if (threadIdx.x == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
template <typename T>
__global__ void input_grad_rows(std::int64_t cols, const T* grad_output, const T* input, const T* weight,
                                const Acc<T>* mean, const Acc<T>* rstd, T* grad_input) {
  using A = Acc<T>;
  __shared__ A scratch[kRowThreads];
  const std::int64_t r = blockIdx.x;
  const T* dy = grad_output + r * cols;
  const T* x = input + r * cols;
  const A mu = mean[r], k = rstd[r];
  A local_g = 0, local_gx = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A g = weight != nullptr ? load(dy, c) * load(weight, c) : load(dy, c);
    local_g += g;
    local_gx += g * (load(x, c) - mu) * k;
  }
  const A n = static_cast<A>(cols);
  const A mean_g = block_combine(local_g, scratch, [](A a, A b) { return a + b; }) / n;
  const A mean_gx = block_combine(local_gx, scratch, [](A a, A b) { return a + b; }) / n;
  T* dx = grad_input + r * cols;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A g = weight != nullptr ? load(dy, c) * load(weight, c) : load(dy, c);
    const A xhat = (load(x, c) - mu) * k;
    dx[c] = store<T>(k * (g - mean_g - xhat * mean_gx));
  }
}

// Block (column tile, row tile): partial sums of dy * xhat and dy over the tile's rows.
template <typename T>
__global__ void affine_grad_partials(std::int64_t rows, std::int64_t cols, const T* grad_output, const T* input,
                                     const Acc<T>* mean, const Acc<T>* rstd, Acc<T>* partial_weight,
                                     Acc<T>* partial_bias) {
  using A = Acc<T>;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * kRowsPerTile;
  const std::int64_t last = min(rows, first + kRowsPerTile);
  A sum_w = 0, sum_b = 0;
  for (std::int64_t r = first; r < last; ++r) {
    const A dy = load(grad_output, r * cols + c);
    sum_w += dy * (load(input, r * cols + c) - mean[r]) * rstd[r];
    sum_b += dy;
  }
  const std::int64_t slot = static_cast<std::int64_t>(blockIdx.y) * cols + c;
  partial_weight[slot] = sum_w;
  partial_bias[slot] = sum_b;
}

template <typename T>
__global__ void affine_grad_finish(std::int64_t tiles, std::int64_t cols, const Acc<T>* partial_weight,
                                   const Acc<T>* partial_bias, T* grad_weight, T* grad_bias) {
  using A = Acc<T>;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  A sum_w = 0, sum_b = 0;
  for (std::int64_t t = 0; t < tiles; ++t) {
    sum_w += partial_weight[t * cols + c];
    sum_b += partial_bias[t * cols + c];
  }
  if (grad_weight != nullptr) grad_weight[c] = store<T>(sum_w);
  if (grad_bias != nullptr) grad_bias[c] = store<T>(sum_b);
}

unsigned rows_grid(const LayerNormShape& s) {
  if (s.rows > 0x7fffffff) throw ShapeError("layer_norm: at most 2^31 - 1 rows per call on CUDA");
  return static_cast<unsigned>(s.rows);
}

}  // namespace

void layer_norm_forward(const Context& ctx, const LayerNormShape& s, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd) {
  if (s.rows == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_floating(dtype, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    forward_rows<T><<<rows_grid(s), kRowThreads, 0, stream_of(ctx.stream)>>>(
        s.cols, static_cast<const T*>(input), static_cast<const T*>(weight), static_cast<const T*>(bias),
        static_cast<A>(eps), static_cast<T*>(output), static_cast<A*>(mean), static_cast<A*>(rstd));
    SUBLET_CUDA_LAUNCH_CHECK(layer_norm_forward_rows);
  });
}

void layer_norm_backward(const Context& ctx, const LayerNormShape& s, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias) {
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_floating(dtype, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const auto* dy = static_cast<const T*>(grad_output);
    const auto* x = static_cast<const T*>(input);
    const auto* mu = static_cast<const A*>(mean);
    const auto* k = static_cast<const A*>(rstd);
    if (grad_input != nullptr && s.rows > 0) {
      input_grad_rows<T><<<rows_grid(s), kRowThreads, 0, stream>>>(s.cols, dy, x, static_cast<const T*>(weight), mu, k,
                                                                  static_cast<T*>(grad_input));
      SUBLET_CUDA_LAUNCH_CHECK(layer_norm_input_grad_rows);
    }
    if (grad_weight == nullptr && grad_bias == nullptr) return;
    const std::int64_t tiles = std::max<std::int64_t>(1, (s.rows + kRowsPerTile - 1) / kRowsPerTile);
    if (tiles > 65535) throw ShapeError("layer_norm_backward: at most 65535 * 64 rows per call on CUDA");
    const std::size_t partial_bytes = static_cast<std::size_t>(tiles * s.cols) * sizeof(A);
    auto partial_weight = ctx.workspace(partial_bytes);
    auto partial_bias = ctx.workspace(partial_bytes);
    const unsigned column_blocks = static_cast<unsigned>((s.cols + kColumnThreads - 1) / kColumnThreads);
    if (s.rows == 0) {
      SUBLET_CUDA_CHECK(cudaMemsetAsync(partial_weight.get(), 0, partial_bytes, stream));
      SUBLET_CUDA_CHECK(cudaMemsetAsync(partial_bias.get(), 0, partial_bytes, stream));
    } else {
      affine_grad_partials<T><<<dim3(column_blocks, static_cast<unsigned>(tiles)), kColumnThreads, 0, stream>>>(
          s.rows, s.cols, dy, x, mu, k, static_cast<A*>(partial_weight.get()), static_cast<A*>(partial_bias.get()));
      SUBLET_CUDA_LAUNCH_CHECK(layer_norm_affine_grad_partials);
    }
    affine_grad_finish<T><<<column_blocks, kColumnThreads, 0, stream>>>(
        tiles, s.cols, static_cast<const A*>(partial_weight.get()), static_cast<const A*>(partial_bias.get()),
        static_cast<T*>(grad_weight), static_cast<T*>(grad_bias));
    SUBLET_CUDA_LAUNCH_CHECK(layer_norm_affine_grad_finish);
  });
}

}  // namespace sublet::ops::cuda
