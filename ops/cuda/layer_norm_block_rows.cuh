#pragma once
// Layer norm with one block per row, for rows too wide (or too oddly aligned) for a warp's
// registers: statistics in two passes over the row (the mean, then the squared deviations), the
// second read found in cache. Weight and bias gradients: per-tile partial column sums in the
// layout of backward_warp_rows' partials, finished by the same kernel.
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/layer_norm_common.cuh"

namespace sublet::ops::cuda::layer_norm_detail {

inline constexpr int kRowThreads = 256;     // a power of two (block_combine)
inline constexpr int kColumnThreads = 256;  // columns per block of the weight/bias partials
inline constexpr std::int64_t kRowsPerTile = 64;

template <typename TX, typename TY>
__global__ void forward_block_rows(std::int64_t cols, const TX* input, const TY* branch, const TX* weight,
                                   const TX* bias, Acc<TX> eps, TX* sum, TY* output, Acc<TX>* mean_out,
                                   Acc<TX>* rstd_out) {
  using A = Acc<TX>;
  __shared__ A scratch[kRowThreads];
  const std::int64_t r = blockIdx.x;
  const std::int64_t offset = r * cols;
  // With a branch, the sum is written first and read back by the same thread (same columns).
  const TX* x = (branch != nullptr ? sum : input) + offset;
  A local = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    if (branch != nullptr) {
      const TX s = store_as<TX>(load_as<A>(input[offset + c]) + load_as<A>(branch[offset + c]));
      sum[offset + c] = s;
      local += load_as<A>(s);
    } else {
      local += load_as<A>(x[c]);
    }
  }
  const A n = static_cast<A>(cols);
  const A mean = block_combine(local, scratch, [](A a, A b) { return a + b; }) / n;
  local = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A d = load_as<A>(x[c]) - mean;
    local += d * d;
  }
  const A rstd = A(1) / sqrt(block_combine(local, scratch, [](A a, A b) { return a + b; }) / n + eps);
  TY* y = output + offset;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A w = weight != nullptr ? load_as<A>(weight[c]) : A(1), b = bias != nullptr ? load_as<A>(bias[c]) : A(0);
    y[c] = store_as<TY>(normalize(load_as<A>(x[c]), mean, rstd, weight != nullptr, w, bias != nullptr, b));
  }
  if (threadIdx.x == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight, plus grad_sum.
template <typename TX, typename TY>
__global__ void input_grad_block_rows(std::int64_t cols, const TY* grad_output, const TX* grad_sum, const TX* input,
                                      const TX* weight, const Acc<TX>* mean, const Acc<TX>* rstd, TX* grad_input,
                                      TY* grad_branch) {
  using A = Acc<TX>;
  __shared__ A scratch[kRowThreads];
  const std::int64_t r = blockIdx.x;
  const std::int64_t offset = r * cols;
  const TY* dy = grad_output + offset;
  const TX* x = input + offset;
  const A mu = mean[r], k = rstd[r];
  A local_g = 0, local_gx = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A g = weight != nullptr ? load_as<A>(dy[c]) * load_as<A>(weight[c]) : load_as<A>(dy[c]);
    local_g += g;
    local_gx += g * ((load_as<A>(x[c]) - mu) * k);
  }
  const A n = static_cast<A>(cols);
  const A mean_g = block_combine(local_g, scratch, [](A a, A b) { return a + b; }) / n;
  const A mean_gx = block_combine(local_gx, scratch, [](A a, A b) { return a + b; }) / n;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A g = weight != nullptr ? load_as<A>(dy[c]) * load_as<A>(weight[c]) : load_as<A>(dy[c]);
    const A xhat = (load_as<A>(x[c]) - mu) * k;
    A dx = round_through<TX>(k * (g - mean_g - xhat * mean_gx));
    if (grad_sum != nullptr) dx = round_through<TX>(add_rounded(dx, load_as<A>(grad_sum[offset + c])));
    grad_input[offset + c] = store_as<TX>(dx);
    if (grad_branch != nullptr) grad_branch[offset + c] = store_as<TY>(dx);
  }
}

// Block (column tile, row tile): partial sums of dy * xhat and dy over the tile's rows, written
// to row blockIdx.y of the partials.
template <typename TX, typename TY>
__global__ void affine_grad_block_partials(std::int64_t rows, std::int64_t cols, const TY* grad_output,
                                           const TX* input, const Acc<TX>* mean, const Acc<TX>* rstd,
                                           Acc<TX>* partial_weight, Acc<TX>* partial_bias) {
  using A = Acc<TX>;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * kRowsPerTile;
  const std::int64_t last = min(rows, first + kRowsPerTile);
  A sum_w = 0, sum_b = 0;
  for (std::int64_t r = first; r < last; ++r) {
    const A dy = load_as<A>(grad_output[r * cols + c]);
    sum_w += dy * ((load_as<A>(input[r * cols + c]) - mean[r]) * rstd[r]);
    sum_b += dy;
  }
  const std::int64_t slot = static_cast<std::int64_t>(blockIdx.y) * cols + c;
  partial_weight[slot] = sum_w;
  partial_bias[slot] = sum_b;
}

}  // namespace sublet::ops::cuda::layer_norm_detail
