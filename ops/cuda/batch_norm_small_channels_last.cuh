#pragma once
// Training batch norm (+ residual + ReLU) of small channels-last tensors in ONE launch each way:
// a block owns one 16-byte pack of V consecutive channels and every row of them, holds its
// values in registers, and reduces, combines and applies in the same kernel.
// Why: the split path (ops/cuda/batch_norm_split.cu) is three launches each way, each a few
// microseconds however small the tensor. ResNet-18 at 32x32 batch 128 has 15 of its 20 batch
// norms on 2,048 rows or fewer (4x4, 2x2 and 1x1 planes); there the launches, not the bytes, are
// the cost.
//
// Served: rows <= kSmallRowsPerThread * kSmallThreads, channels a multiple of V, 16-byte-aligned
// pointers (small_channels_last_fits). One block per pack: C / V blocks of kSmallThreads threads;
// thread t holds rows t, t + 256, ... (up to 8).
//
// Numerics: the forward takes the mean first (per-thread float sums, then a fixed-order block sum
// in double), then the squared deviations about it the same way: two passes over registers, so
// inputs far from zero keep their variance. The backward's two sums likewise. Fixed orders:
// repeated runs give identical bits. The per-element formulas are those of the split path
// (normalized_value, input_gradient_value); the statistics may differ from it in the last bits.
#include <cstdint>

#include "ops/cuda/batch_norm_accumulators.cuh"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::cuda::batch_norm_detail {

inline constexpr int kSmallThreads = 256;
inline constexpr int kSmallRowsPerThread = 8;
inline constexpr int kSmallWarps = kSmallThreads / 32;

// The sums of v[0..V) over the block, every thread getting them: a shuffle tree per warp, then
// the warps' totals in warp order. `shared` holds kSmallWarps * V doubles.
template <int V>
__device__ inline void block_sums(double (&v)[V], double* shared) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    for (int offset = 16; offset > 0; offset /= 2) v[j] += __shfl_down_sync(0xffffffffu, v[j], offset);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
#pragma unroll
    for (int j = 0; j < V; ++j) shared[warp * V + j] = v[j];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < V; ++j) {
    double total = 0;
    for (int w = 0; w < kSmallWarps; ++w) total += shared[w * V + j];
    v[j] = total;
  }
  __syncthreads();  // before the next call overwrites `shared`
}

template <typename T, int V>
__global__ void __launch_bounds__(kSmallThreads)
    small_forward_channels_last(int rows, int channels, const T* input, const T* residual,
                                bool relu, const float* weight, const float* bias, float* running_mean,
                                float* running_var, double momentum, double eps, T* output,
                                float* save_mean, float* save_invstd, std::int64_t* num_batches_tracked) {
  __shared__ double shared[kSmallWarps * V];
  __shared__ float coefficient[2][V];  // scale, shift
  __shared__ float centre_of[V];
  const int c0 = blockIdx.x * V;
  Pack<T, V> x[kSmallRowsPerThread];
  double sum[V] = {};
#pragma unroll
  for (int k = 0; k < kSmallRowsPerThread; ++k) {
    const int r = threadIdx.x + k * kSmallThreads;
    if (r < rows) {
      x[k] = load_pack<T, V>(input, static_cast<std::int64_t>(r) * channels + c0);
      float part[V];
#pragma unroll
      for (int j = 0; j < V; ++j) part[j] = load_compute(x[k].v[j]);
#pragma unroll
      for (int j = 0; j < V; ++j) sum[j] += part[j];
    }
  }
  block_sums<V>(sum, shared);
  float mean[V];
#pragma unroll
  for (int j = 0; j < V; ++j) mean[j] = static_cast<float>(sum[j] / rows);
  double m2[V] = {};
#pragma unroll
  for (int k = 0; k < kSmallRowsPerThread; ++k) {
    if (threadIdx.x + k * kSmallThreads < rows) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float d = load_compute(x[k].v[j]) - mean[j];
        m2[j] += d * d;
      }
    }
  }
  block_sums<V>(m2, shared);
  // Thread j finishes channel c0 + j (a loop with constant indices keeps the sums in registers).
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (threadIdx.x != j) continue;
    const int c = c0 + j;
    if (num_batches_tracked != nullptr && c == 0) ++*num_batches_tracked;  // the module's count, folded in
    const double centre = sum[j] / rows;
    const double invstd = 1.0 / sqrt(m2[j] / rows + eps);  // biased variance, for normalising
    save_mean[c] = static_cast<float>(centre);
    save_invstd[c] = static_cast<float>(invstd);
    if (running_mean != nullptr) running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * centre);
    if (running_var != nullptr) {
      running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * (m2[j] / (rows - 1)));
    }
    centre_of[j] = static_cast<float>(centre);
    // From the saved float invstd, as a backward recomputing the ReLU's mask derives it.
    coefficient[0][j] = normalizing_scale(static_cast<float>(invstd), weight != nullptr ? weight[c] : 1.0f);
    coefficient[1][j] = bias != nullptr ? bias[c] : 0.0f;
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kSmallRowsPerThread; ++k) {
    const int r = threadIdx.x + k * kSmallThreads;
    if (r < rows) {
      const std::int64_t i = static_cast<std::int64_t>(r) * channels + c0;
      Pack<T, V> res{};
      if (residual != nullptr) res = load_pack<T, V>(residual, i);
      float y[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        y[j] = normalized_value(load_compute(x[k].v[j]), centre_of[j], coefficient[0][j], coefficient[1][j],
                                residual != nullptr, load_compute(res.v[j]), relu);
      }
      store_pack<T, V>(output, i, pack_from_floats<T, V>(y));
    }
  }
}

// Training backward: the fused ReLU's mask (ReluMask: none, its output, or recomputed from x)
// gates the gradient; the gated gradient goes to grad_residual when wanted. Any of the outputs
// may be nullptr.
template <typename T, int V>
__global__ void __launch_bounds__(kSmallThreads)
    small_backward_channels_last(int rows, int channels, const T* grad_output,
                                 const T* input, ReluMask<T> mask, const float* weight,
                                 const float* save_mean, const float* save_invstd, T* grad_input,
                                 float* grad_weight, float* grad_bias, T* grad_residual) {
  __shared__ double shared[kSmallWarps * V];
  __shared__ Coefficients coefficients[V];
  const int c0 = blockIdx.x * V;
  float centre[V], scale[V] = {}, shift[V] = {};  // scale, shift: the forward's, where mask.from_input
#pragma unroll
  for (int j = 0; j < V; ++j) {
    centre[j] = save_mean[c0 + j];
    if (mask.from_input) scale[j] = mask.scale(c0 + j), shift[j] = mask.shift(c0 + j);
  }
  Pack<T, V> g[kSmallRowsPerThread], x[kSmallRowsPerThread];
  double sum_g[V] = {}, sum_g_centred[V] = {};
#pragma unroll
  for (int k = 0; k < kSmallRowsPerThread; ++k) {
    const int r = threadIdx.x + k * kSmallThreads;
    if (r < rows) {
      const std::int64_t i = static_cast<std::int64_t>(r) * channels + c0;
      g[k] = load_pack<T, V>(grad_output, i);
      x[k] = load_pack<T, V>(input, i);
      if (mask.output != nullptr) {
        const Pack<T, V> kept = load_pack<T, V>(mask.output, i);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (!is_positive(kept.v[j])) g[k].v[j] = store_compute<T>(0.0f);
        }
      } else if (mask.from_input) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (!relu_passed_from_input<T>(load_compute(x[k].v[j]), centre[j], scale[j], shift[j])) {
            g[k].v[j] = store_compute<T>(0.0f);
          }
        }
      }
      float part_g[V], part_gc[V];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float gv = load_compute(g[k].v[j]);
        part_g[j] = gv;
        part_gc[j] = gv * (load_compute(x[k].v[j]) - centre[j]);
      }
#pragma unroll
      for (int j = 0; j < V; ++j) sum_g[j] += part_g[j], sum_g_centred[j] += part_gc[j];
    }
  }
  block_sums<V>(sum_g, shared);
  block_sums<V>(sum_g_centred, shared);
#pragma unroll
  for (int j = 0; j < V; ++j) {  // thread j finishes channel c0 + j
    if (threadIdx.x != j) continue;
    const int c = c0 + j;
    const double invstd = save_invstd[c];
    if (grad_weight != nullptr) grad_weight[c] = static_cast<float>(sum_g_centred[j] * invstd);
    if (grad_bias != nullptr) grad_bias[c] = static_cast<float>(sum_g[j]);
    const float input_scale = normalizing_scale(save_invstd[c], weight != nullptr ? weight[c] : 1.0f);
    coefficients[j] = {centre[j], input_scale, 0.0f, static_cast<float>(sum_g[j] / rows),
                       static_cast<float>(sum_g_centred[j] * invstd * invstd / rows)};
  }
  __syncthreads();
  if (grad_input == nullptr && grad_residual == nullptr) return;
#pragma unroll
  for (int k = 0; k < kSmallRowsPerThread; ++k) {
    const int r = threadIdx.x + k * kSmallThreads;
    if (r < rows) {
      const std::int64_t i = static_cast<std::int64_t>(r) * channels + c0;
      if (grad_residual != nullptr) store_pack<T, V>(grad_residual, i, g[k]);
      if (grad_input != nullptr) {
        float dx[V];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const Coefficients& q = coefficients[j];
          dx[j] = input_gradient_value(load_compute(g[k].v[j]), load_compute(x[k].v[j]), q.centre, q.scale,
                                       q.grad_mean, q.xhat_factor, true);
        }
        store_pack<T, V>(grad_input, i, pack_from_floats<T, V>(dx));
      }
    }
  }
}

}  // namespace sublet::ops::cuda::batch_norm_detail
