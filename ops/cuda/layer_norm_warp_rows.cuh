#pragma once
// Layer norm with one warp per row and the row in registers: each row is read once from memory
// (forward: input, then the output written; backward: input and output gradient, then the input
// gradient written), statistics in two passes over the registers (mean, then squared
// deviations). Lane l holds the V-element packs at columns (i * 32 + l) * V for i < CHUNKS; with
// V > 1 the caller guarantees cols % V == 0 and aligned pointers, so a pack is wholly in or out.
#include "ops/cuda/layer_norm_common.cuh"

namespace sublet::ops::cuda::layer_norm_detail {

inline constexpr int kWarpRowThreads = 256;  // 8 rows per block
inline constexpr int kWarpsPerBlock = kWarpRowThreads / 32;

template <int V, int CHUNKS>
__device__ inline bool pack_in_row(int i, int lane, int cols) {
  return (i * 32 + lane) * V < cols;
}

template <typename TX, typename TY, int V, int CHUNKS>
__global__ void __launch_bounds__(kWarpRowThreads)
    forward_warp_rows(std::int64_t rows, int cols, const TX* input, const TY* branch, const TX* weight,
                      const TX* bias, Acc<TX> eps, TX* sum, TY* output, Acc<TX>* mean_out, Acc<TX>* rstd_out) {
  using A = Acc<TX>;
  const int lane = threadIdx.x & 31;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp leaves together
  const std::int64_t offset = r * cols;
  A v[CHUNKS][V];
  A local = 0;
#pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    if (!pack_in_row<V, CHUNKS>(i, lane, cols)) continue;
    const int c = (i * 32 + lane) * V;
    load_pack<V>(input + offset + c, v[i]);
    if (branch != nullptr) {
      A h[V];
      load_pack<V>(branch + offset + c, h);
#pragma unroll
      for (int j = 0; j < V; ++j) v[i][j] = round_through<TX>(v[i][j] + h[j]);
      store_pack<V>(sum + offset + c, v[i]);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) local += v[i][j];
  }
  const A n = static_cast<A>(cols);
  const A mean = warp_sum(local) / n;
  local = 0;
#pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    if (!pack_in_row<V, CHUNKS>(i, lane, cols)) continue;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A d = v[i][j] - mean;
      local += d * d;
    }
  }
  const A rstd = A(1) / sqrt(warp_sum(local) / n + eps);
#pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    if (!pack_in_row<V, CHUNKS>(i, lane, cols)) continue;
    const int c = (i * 32 + lane) * V;
    A w[V], b[V], y[V];
    if (weight != nullptr) load_pack<V>(weight + c, w);
    if (bias != nullptr) load_pack<V>(bias + c, b);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      y[j] = normalize(v[i][j], mean, rstd, weight != nullptr, weight != nullptr ? w[j] : A(1), bias != nullptr,
                       bias != nullptr ? b[j] : A(0));
    }
    store_pack<V>(output + offset + c, y);
  }
  if (lane == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight, plus the residual path's
// gradient. With partials: each lane sums dy * xhat and dy of its columns over its warp's rows,
// the block adds its warps in order in shared memory (2 * cols accumulators, dynamic) and writes
// row blockIdx.x of partial_weight/partial_bias ([gridDim.x, cols]).
template <typename TX, typename TY, int V, int CHUNKS>
__global__ void __launch_bounds__(kWarpRowThreads)
    backward_warp_rows(std::int64_t rows, int cols, const TY* grad_output, const TX* grad_sum, const TX* input,
                       const TX* weight, const Acc<TX>* mean, const Acc<TX>* rstd, TX* grad_input, TY* grad_branch,
                       Acc<TX>* partial_weight, Acc<TX>* partial_bias) {
  using A = Acc<TX>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const bool partials = partial_weight != nullptr;
  A acc_w[CHUNKS][V], acc_b[CHUNKS][V];
#pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
#pragma unroll
    for (int j = 0; j < V; ++j) acc_w[i][j] = acc_b[i][j] = 0;
  }
  const A n = static_cast<A>(cols);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kWarpsPerBlock;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + warp; r < rows; r += stride) {
    const std::int64_t offset = r * cols;
    const A mu = mean[r], k = rstd[r];
    A xhat[CHUNKS][V], dy[CHUNKS][V];
    A local_g = 0, local_gx = 0;
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
      if (!pack_in_row<V, CHUNKS>(i, lane, cols)) continue;
      const int c = (i * 32 + lane) * V;
      load_pack<V>(input + offset + c, xhat[i]);
      load_pack<V>(grad_output + offset + c, dy[i]);
      A w[V];
      if (weight != nullptr) load_pack<V>(weight + c, w);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xhat[i][j] = (xhat[i][j] - mu) * k;
        const A g = weight != nullptr ? dy[i][j] * w[j] : dy[i][j];
        local_g += g;
        local_gx += g * xhat[i][j];
        if (partials) {
          acc_w[i][j] += dy[i][j] * xhat[i][j];
          acc_b[i][j] += dy[i][j];
        }
      }
    }
    if (grad_input == nullptr) continue;
    const A mean_g = warp_sum(local_g) / n, mean_gx = warp_sum(local_gx) / n;
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
      if (!pack_in_row<V, CHUNKS>(i, lane, cols)) continue;
      const int c = (i * 32 + lane) * V;
      A w[V], dx[V];
      if (weight != nullptr) load_pack<V>(weight + c, w);
      if (grad_sum != nullptr) load_pack<V>(grad_sum + offset + c, dx);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A g = weight != nullptr ? dy[i][j] * w[j] : dy[i][j];
        const A own = round_through<TX>(k * (g - mean_g - xhat[i][j] * mean_gx));
        dx[j] = grad_sum != nullptr ? round_through<TX>(add_rounded(own, dx[j])) : own;
      }
      store_pack<V>(grad_input + offset + c, dx);
      if (grad_branch != nullptr) store_pack<V>(grad_branch + offset + c, dx);
    }
  }
  if (!partials) return;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  A* sum_w = reinterpret_cast<A*>(shared_bytes);
  A* sum_b = sum_w + cols;
  for (int w = 0; w < kWarpsPerBlock; ++w) {
    if (warp == w) {
#pragma unroll
      for (int i = 0; i < CHUNKS; ++i) {
        if (!pack_in_row<V, CHUNKS>(i, lane, cols)) continue;
        const int c = (i * 32 + lane) * V;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          sum_w[c + j] = w == 0 ? acc_w[i][j] : sum_w[c + j] + acc_w[i][j];
          sum_b[c + j] = w == 0 ? acc_b[i][j] : sum_b[c + j] + acc_b[i][j];
        }
      }
    }
    __syncthreads();
  }
  const std::int64_t slot = static_cast<std::int64_t>(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    partial_weight[slot + c] = sum_w[c];
    partial_bias[slot + c] = sum_b[c];
  }
}

}  // namespace sublet::ops::cuda::layer_norm_detail
