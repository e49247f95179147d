#pragma once
// The per-channel combines of ops/cuda/batch_norm_split.cu: the reductions' partials per
// (slice, channel) merged into each channel's statistics or gradient sums, and the per-channel
// coefficients of the element-wise passes.
#include <cstdint>

#include "ops/cuda/batch_norm_accumulators.cuh"
#include "ops/cuda/launch.cuh"

namespace sublet::ops::cuda::batch_norm_detail {

// ---- per-channel combines ---------------------------------------------------------------------
// One block per channel: thread t takes slices t, t + 256, ...; the block sums in double by a
// fixed tree (deterministic). The statistics use Chan's formula in two passes of plain sums
// (count and sum of n * mean, then the squared deviations about that mean) instead of pairwise
// Welford merges: no division per partial, and every load of a pass independent of the others,
// where pairwise merges would chain dependent divisions in each lane.

inline constexpr int kCombineThreads = 256;
inline constexpr int kCombineWarps = kCombineThreads / 32;

// The sum of `value` over the block, every thread getting it: a shuffle tree in each warp, then
// warp 0 over the warps' totals. `shared` holds kCombineWarps + 1 doubles.
__device__ inline double block_sum(double value, double* shared) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < kCombineWarps ? shared[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffffu, value, offset);
    if (lane == 0) shared[kCombineWarps] = value;
  }
  __syncthreads();
  const double total = shared[kCombineWarps];
  __syncthreads();  // before the next call overwrites it
  return total;
}

inline unsigned combine_blocks(std::int64_t channels) { return static_cast<unsigned>(channels); }

__global__ void __launch_bounds__(kCombineThreads)
    combine_statistics(std::int64_t channels, std::int64_t slices, const Welford* partials, double count,
                       double momentum, double eps, const float* weight, const float* bias, float* running_mean,
                       float* running_var, float* save_mean, float* save_invstd, Coefficients* coefficients,
                       std::int64_t* num_batches_tracked) {
  __shared__ double shared[kCombineWarps + 1];
  const std::int64_t c = blockIdx.x;
  double n = 0, sum = 0;
  for (std::int64_t k = threadIdx.x; k < slices; k += kCombineThreads) {
    const Welford p = partials[k * channels + c];
    n += p.n;
    sum += static_cast<double>(p.n) * p.mean;
  }
  n = block_sum(n, shared);
  sum = block_sum(sum, shared);
  const double mean = n > 0 ? sum / n : 0.0;
  double m2 = 0;
  for (std::int64_t k = threadIdx.x; k < slices; k += kCombineThreads) {
    const Welford p = partials[k * channels + c];
    const double d = static_cast<double>(p.mean) - mean;
    m2 += static_cast<double>(p.m2) + static_cast<double>(p.n) * d * d;
  }
  m2 = block_sum(m2, shared);
  if (threadIdx.x != 0) return;
  if (num_batches_tracked != nullptr && c == 0) ++*num_batches_tracked;  // the module's count, folded in
  const double var = m2 / count;  // biased, for normalising
  const double invstd = 1.0 / sqrt(var + eps);
  save_mean[c] = static_cast<float>(mean);
  save_invstd[c] = static_cast<float>(invstd);
  if (running_mean != nullptr) running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mean);
  if (running_var != nullptr) {
    running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * (m2 / (count - 1)));
  }
  // From the saved float invstd, as a backward recomputing the ReLU's mask derives it.
  const float scale = normalizing_scale(static_cast<float>(invstd), weight != nullptr ? weight[c] : 1.0f);
  coefficients[c] = {static_cast<float>(mean), scale, bias != nullptr ? bias[c] : 0.0f, 0.0f, 0.0f};
}

__global__ void eval_coefficients(std::int64_t channels, const float* weight, const float* bias,
                                  const float* running_mean, const float* running_var, double eps,
                                  Coefficients* coefficients) {
  const std::int64_t c = global_thread_index();
  if (c >= channels) return;
  const double scale =
      (weight != nullptr ? static_cast<double>(weight[c]) : 1.0) / sqrt(static_cast<double>(running_var[c]) + eps);
  coefficients[c] = {running_mean[c], static_cast<float>(scale), bias != nullptr ? bias[c] : 0.0f, 0.0f, 0.0f};
}

// invstd: save_invstd (training) or from running_var + eps (eval); centres as in GradSource.
// Without partials (slices = 0) only the input gradient's scale is wanted (eval). bias: the
// forward's (training, where the input gradient pass recomputes the ReLU's mask), else nullptr.
__global__ void __launch_bounds__(kCombineThreads)
    combine_gradients(std::int64_t channels, std::int64_t slices, const GradSums* partials, double count,
                      bool training, const float* weight, const float* bias, const float* centres,
                      const float* save_invstd, const float* running_var, double eps, float* grad_weight,
                      float* grad_bias, Coefficients* coefficients) {
  __shared__ double shared[kCombineWarps + 1];
  const std::int64_t c = blockIdx.x;
  double g = 0, g_centred = 0;
  for (std::int64_t k = threadIdx.x; k < slices; k += kCombineThreads) {
    const GradSums p = partials[k * channels + c];
    g += p.g;
    g_centred += p.g_centred;
  }
  g = block_sum(g, shared);
  g_centred = block_sum(g_centred, shared);
  if (threadIdx.x != 0) return;
  const double invstd = training ? static_cast<double>(save_invstd[c])
                                 : 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
  if (grad_weight != nullptr) grad_weight[c] = static_cast<float>(g_centred * invstd);
  if (grad_bias != nullptr) grad_bias[c] = static_cast<float>(g);
  const float w = weight != nullptr ? weight[c] : 1.0f;
  if (training) {  // the forward's centre, scale and shift (normalizing_scale of the same floats)
    coefficients[c] = {centres[c], normalizing_scale(save_invstd[c], w), bias != nullptr ? bias[c] : 0.0f,
                       static_cast<float>(g / count), static_cast<float>(g_centred * invstd * invstd / count)};
  } else {
    coefficients[c] = {0.0f, static_cast<float>(invstd * static_cast<double>(w)), 0.0f, 0.0f, 0.0f};
  }
}

}  // namespace sublet::ops::cuda::batch_norm_detail
