#pragma once
// The per-thread accumulators of ops/cuda/batch_norm_split.cu's reductions, the fixed-order
// block merge they share, and the per-channel coefficients its element-wise passes apply. Scalar ones (one channel per thread) and packed ones (V consecutive
// channels per thread, read with one 16-byte load: the channels-last reductions).
#include <cstdint>

#include "ops/cuda/half_types.cuh"

namespace sublet::ops::cuda::batch_norm_detail {

struct Welford {  // count, mean and sum of squared deviations of the values pushed
  float n, mean, m2;
};

__device__ inline void push_value(Welford& w, float x) {
  w.n += 1.0f;
  const float d = x - w.mean;
  w.mean += d / w.n;
  w.m2 += d * (x - w.mean);
}

__device__ inline Welford merge(const Welford& a, const Welford& b) {
  if (b.n == 0.0f) return a;
  if (a.n == 0.0f) return b;
  const float n = a.n + b.n, d = b.mean - a.mean, fb = b.n / n;
  return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

struct GradSums {  // sum(g) and sum(g * (x - centre))
  float g, g_centred;
};

__device__ inline GradSums merge(const GradSums& a, const GradSums& b) { return {a.g + b.g, a.g_centred + b.g_centred}; }

// Welford over V channels that see the same number of values: one count, and one reciprocal
// of it per pushed row instead of V divisions (the division made the one-channel reduction
// compute-bound on 16-bit inputs).
template <int V>
struct WelfordPack {
  float n;
  float mean[V], m2[V];
  __device__ Welford channel(int j) const { return {n, mean[j], m2[j]}; }
};

template <int V>
__device__ inline void push_values(WelfordPack<V>& w, const float (&x)[V]) {
  w.n += 1.0f;
  const float inv_n = 1.0f / w.n;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const float d = x[j] - w.mean[j];
    w.mean[j] += d * inv_n;
    w.m2[j] += d * (x[j] - w.mean[j]);
  }
}

template <int V>
__device__ inline WelfordPack<V> merge(const WelfordPack<V>& a, const WelfordPack<V>& b) {
  if (b.n == 0.0f) return a;
  if (a.n == 0.0f) return b;
  WelfordPack<V> out;
  out.n = a.n + b.n;
  const float fb = b.n / out.n;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const float d = b.mean[j] - a.mean[j];
    out.mean[j] = a.mean[j] + d * fb;
    out.m2[j] = a.m2[j] + b.m2[j] + d * d * a.n * fb;
  }
  return out;
}

template <int V>
struct GradSumsPack {
  float g[V], g_centred[V];
  __device__ GradSums channel(int j) const { return {g[j], g_centred[j]}; }
};

template <int V>
__device__ inline GradSumsPack<V> merge(const GradSumsPack<V>& a, const GradSumsPack<V>& b) {
  GradSumsPack<V> out;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    out.g[j] = a.g[j] + b.g[j];
    out.g_centred[j] = a.g_centred[j] + b.g_centred[j];
  }
  return out;
}

// What the element-wise passes apply per channel. Forward: y = (x - centre) * scale + shift.
// Backward: dx = scale * (g - grad_mean - (x - centre) * xhat_factor); shift is the forward's
// where the backward recomputes the ReLU's mask from x (relu_passed_from_input), else unused.
struct Coefficients {
  float centre, scale, shift, grad_mean, xhat_factor;
};

// A channel's scale, invstd * weight, from the float32 invstd that save_invstd holds: the
// forwards, and the backwards that recompute the ReLU's mask from x, derive it from the same
// float, so they get the same bits. weight: 1 without an affine transform.
__host__ __device__ inline float normalizing_scale(float invstd, float weight) {
  return static_cast<float>(static_cast<double>(invstd) * static_cast<double>(weight));
}

// One element of each pass, shared by the flat and the channels-last kernels so that both give
// the same bits. Forward: + residual (when there is one), then the ReLU (as UnaryOp::Relu: NaN -> 0).
// One explicit fused multiply-add, so that the backward's recomputation (relu_passed_from_input)
// cannot be contracted differently by the compiler.
__device__ __forceinline__ float normalized_value(float x, float centre, float scale, float shift, bool add_residual,
                                                  float residual, bool relu) {
  float value = __fmaf_rn(x - centre, scale, shift);
  if (add_residual) value += residual;
  if (relu) value = value > 0.0f ? value : 0.0f;
  return value;
}

// Whether the fused forward without a residual stored a positive output for x, i.e. the ReLU
// passed the gradient there: the forward's value, rounded to T as it was stored, tested as the
// backward tests the stored output. A positive value that rounds to 0 in T is not passed.
template <typename T>
__device__ __forceinline__ bool relu_passed_from_input(float x, float centre, float scale, float shift) {
  return is_positive(store_compute<T>(normalized_value(x, centre, scale, shift, false, 0.0f, true)));
}

// Backward: g already zeroed where the fused ReLU did not pass it; training uses the batch
// statistics' gradient, eval only the scale (x unused).
__device__ __forceinline__ float input_gradient_value(float g, float x, float centre, float scale, float grad_mean,
                                                      float xhat_factor, bool training) {
  return training ? scale * (g - grad_mean - (x - centre) * xhat_factor) : scale * g;
}

// Where a backward takes the fused ReLU's mask from: nowhere (no ReLU: every gradient passes),
// the stored output (`output`), or x with the forward's coefficients (`from_input`, a forward
// without a residual: centre = save_mean, scale from save_invstd and weight, shift = bias).
template <typename T>
struct ReluMask {
  const T* output = nullptr;  // nullptr where from_input or without the ReLU
  bool from_input = false;
  const float* invstd = nullptr;  // from_input: save_invstd
  const float* weight = nullptr;  // from_input: nullptr for 1
  const float* bias = nullptr;    // from_input: nullptr for 0
  __device__ float scale(std::int64_t c) const { return normalizing_scale(invstd[c], weight != nullptr ? weight[c] : 1.0f); }
  __device__ float shift(std::int64_t c) const { return bias != nullptr ? bias[c] : 0.0f; }
};

// The channels-last kernels' block: tx channel packs of `width` channels (a power of two up to
// 32, so a warp reads up to 32 consecutive packs of a row) by ty = threads / tx rows; `across`
// blocks side by side cover the channels.
struct PackTile {
  unsigned tx, ty;
  std::int64_t across;
};

inline PackTile pack_tile(std::int64_t channels, int width, unsigned threads) {
  const std::int64_t packs = channels / width;
  unsigned tx = 1;
  while (tx < packs && tx < 32) tx *= 2;
  return {tx, threads / tx, (packs + tx - 1) / tx};
}

// Combines the values of a group of `count` threads (a power of two) whose flat ids are
// base + k * stride; `pos` is this thread's k, `me` its flat id. A fixed tree: deterministic.
// Every thread of the block calls it; the group's result is returned to all its members.
template <typename Acc>
__device__ Acc merge_group(Acc value, Acc* shared, unsigned me, unsigned pos, unsigned count, unsigned stride) {
  shared[me] = value;
  __syncthreads();
  for (unsigned half = count / 2; half > 0; half /= 2) {
    if (pos < half) shared[me] = merge(shared[me], shared[me + half * stride]);
    __syncthreads();
  }
  const Acc result = shared[me - pos * stride];
  __syncthreads();
  return result;
}

}  // namespace sublet::ops::cuda::batch_norm_detail
