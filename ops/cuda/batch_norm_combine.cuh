#pragma once
// The per-channel combines of ops/cuda/batch_norm_split.cu: the reductions' partials per
// (slice, channel) merged into each channel's statistics or gradient sums, and the per-channel
// coefficients of the element-wise passes.
#include <cstdint>

#include "ops/cuda/batch_norm_accumulators.cuh"
#include "ops/cuda/launch.cuh"

namespace sublet::ops::cuda::batch_norm_detail {

// ---- per-channel combines ---------------------------------------------------------------------
// One warp per channel: lane l merges slices l, l + 32, ... in order, then the lanes merge by a
// fixed shuffle tree (deterministic), in double. A thread per channel looping over all slices
// took ~15 us for 64 channels of 512 slices (the NHWC stem shape), more than the data's read.

inline constexpr int kCombineWarps = 8;  // channels per 256-thread block

struct Moments {  // count, mean, sum of squared deviations, in double
  double n, mean, m2;
};

__device__ inline Moments merge(const Moments& a, const Moments& b) {
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  const double n = a.n + b.n, d = b.mean - a.mean;
  return {n, a.mean + d * b.n / n, a.m2 + b.m2 + d * d * a.n * b.n / n};
}

__device__ inline Moments shuffle_down(const Moments& m, int offset) {
  return {__shfl_down_sync(0xffffffffu, m.n, offset), __shfl_down_sync(0xffffffffu, m.mean, offset),
          __shfl_down_sync(0xffffffffu, m.m2, offset)};
}

struct Sums2 {  // the backward's two sums, in double
  double g, g_centred;
};

__device__ inline Sums2 merge(const Sums2& a, const Sums2& b) { return {a.g + b.g, a.g_centred + b.g_centred}; }

__device__ inline Sums2 shuffle_down(const Sums2& m, int offset) {
  return {__shfl_down_sync(0xffffffffu, m.g, offset), __shfl_down_sync(0xffffffffu, m.g_centred, offset)};
}

// Lane 0 gets the warp's total; every lane must call it.
template <typename V>
__device__ V warp_merge(V value) {
  for (int offset = 16; offset > 0; offset /= 2) value = merge(value, shuffle_down(value, offset));
  return value;
}

inline unsigned combine_blocks(std::int64_t channels) {
  return static_cast<unsigned>((channels + kCombineWarps - 1) / kCombineWarps);
}

__global__ void combine_statistics(std::int64_t channels, std::int64_t slices, const Welford* partials, double count,
                                   double momentum, double eps, const float* weight, const float* bias,
                                   float* running_mean, float* running_var, float* save_mean, float* save_invstd,
                                   Coefficients* coefficients) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kCombineWarps + threadIdx.x / 32;
  if (c >= channels) return;  // the whole warp: c is the warp's
  const int lane = threadIdx.x % 32;
  Moments m{0, 0, 0};
  for (std::int64_t s = lane; s < slices; s += 32) {
    const Welford p = partials[s * channels + c];
    m = merge(m, Moments{p.n, p.mean, p.m2});
  }
  m = warp_merge(m);
  if (lane != 0) return;
  const double mean = m.mean, m2 = m.m2;
  const double var = m2 / count;  // biased, for normalising
  const double invstd = 1.0 / sqrt(var + eps);
  save_mean[c] = static_cast<float>(mean);
  save_invstd[c] = static_cast<float>(invstd);
  if (running_mean != nullptr) running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mean);
  if (running_var != nullptr) {
    running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * (m2 / (count - 1)));
  }
  const double scale = invstd * (weight != nullptr ? static_cast<double>(weight[c]) : 1.0);
  coefficients[c] = {static_cast<float>(mean), static_cast<float>(scale),
                     bias != nullptr ? bias[c] : 0.0f, 0.0f, 0.0f};
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
// Without partials (slices = 0) only the input gradient's scale is wanted (eval).
__global__ void combine_gradients(std::int64_t channels, std::int64_t slices, const GradSums* partials, double count,
                                  bool training, const float* weight, const float* centres, const float* save_invstd,
                                  const float* running_var, double eps, float* grad_weight, float* grad_bias,
                                  Coefficients* coefficients) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kCombineWarps + threadIdx.x / 32;
  if (c >= channels) return;  // the whole warp: c is the warp's
  const int lane = threadIdx.x % 32;
  Sums2 sums{0, 0};
  for (std::int64_t s = lane; s < slices; s += 32) {
    const GradSums p = partials[s * channels + c];
    sums = merge(sums, Sums2{p.g, p.g_centred});
  }
  sums = warp_merge(sums);
  if (lane != 0) return;
  const double g = sums.g, g_centred = sums.g_centred;
  const double invstd = training ? static_cast<double>(save_invstd[c])
                                 : 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
  if (grad_weight != nullptr) grad_weight[c] = static_cast<float>(g_centred * invstd);
  if (grad_bias != nullptr) grad_bias[c] = static_cast<float>(g);
  const double scale = invstd * (weight != nullptr ? static_cast<double>(weight[c]) : 1.0);
  if (training) {
    coefficients[c] = {centres[c], static_cast<float>(scale), 0.0f, static_cast<float>(g / count),
                       static_cast<float>(g_centred * invstd * invstd / count)};
  } else {
    coefficients[c] = {0.0f, static_cast<float>(scale), 0.0f, 0.0f, 0.0f};
  }
}

}  // namespace sublet::ops::cuda::batch_norm_detail
