#pragma once
// The element-wise passes of ops/cuda/batch_norm_split.cu for channels-last tensors whose
// channels split into aligned 16-byte packs: each thread keeps one pack of V channels and their
// coefficients in registers and walks down the rows. The flat kernels (one pack per grid-stride
// step) re-read 5 floats of coefficients per element and divide the flat index to find the
// channel, which keeps them well below the memory bandwidth on large channels-last tensors.
// The per-element formulas are shared with the flat kernels (normalized_value and
// input_gradient_value, ops/cuda/batch_norm_accumulators.cuh): the same bits.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/batch_norm_accumulators.cuh"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::cuda::batch_norm_detail {

inline constexpr int kPassThreads = 256;
inline constexpr std::int64_t kPassRowsPerThread = 4;

template <typename T, int V>
__global__ void __launch_bounds__(kPassThreads)
    normalize_channels_last(std::int64_t rows, std::int64_t channels, const Coefficients* coefficients, const T* input,
                            const T* residual, bool relu, T* output) {
  const std::int64_t c0 = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (c0 >= channels) return;
  float centre[V], scale[V], shift[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const Coefficients k = coefficients[c0 + j];
    centre[j] = k.centre, scale[j] = k.scale, shift[j] = k.shift;
  }
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * blockDim.y;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += step) {
    const std::int64_t i = r * channels + c0;
    const Pack<T, V> x = load_pack<T, V>(input, i);
    Pack<T, V> res{};
    if (residual != nullptr) res = load_pack<T, V>(residual, i);
    float y[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      y[j] = normalized_value(load_compute(x.v[j]), centre[j], scale[j], shift[j], residual != nullptr,
                              load_compute(res.v[j]), relu);
    }
    store_pack<T, V>(output, i, pack_from_floats<T, V>(y));
  }
}

// training: the batch-statistics gradient; else dx = scale * g (input not read). The ReLU's
// mask: from relu_output where given, else from x and the coefficients' centre, scale and shift
// where mask_from_input (the forward's: combine_gradients), else every value passes.
template <typename T, int V>
__global__ void __launch_bounds__(kPassThreads)
    input_gradient_channels_last(std::int64_t rows, std::int64_t channels, const Coefficients* coefficients,
                                 const T* grad_output, const T* input, const T* relu_output, bool mask_from_input,
                                 bool training, T* grad_input, T* grad_residual) {
  const std::int64_t c0 = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (c0 >= channels) return;
  float centre[V], scale[V], shift[V], grad_mean[V], xhat_factor[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const Coefficients k = coefficients[c0 + j];
    centre[j] = k.centre, scale[j] = k.scale, shift[j] = k.shift, grad_mean[j] = k.grad_mean,
    xhat_factor[j] = k.xhat_factor;
  }
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * blockDim.y;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += step) {
    const std::int64_t i = r * channels + c0;
    const Pack<T, V> g = load_pack<T, V>(grad_output, i);
    Pack<T, V> kept{}, x{}, gated = g;  // gated: g where the ReLU passed it, else 0
    if (relu_output != nullptr) kept = load_pack<T, V>(relu_output, i);
    if ((grad_input != nullptr && training) || mask_from_input) x = load_pack<T, V>(input, i);
    float dx[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const bool passed = mask_from_input ? relu_passed_from_input<T>(load_compute(x.v[j]), centre[j], scale[j], shift[j])
                                          : relu_output == nullptr || is_positive(kept.v[j]);
      if (!passed) gated.v[j] = store_compute<T>(0.0f);
      const float gv = passed ? load_compute(g.v[j]) : 0.0f;
      dx[j] = input_gradient_value(gv, load_compute(x.v[j]), centre[j], scale[j], grad_mean[j], xhat_factor[j],
                                   training);
    }
    if (grad_residual != nullptr) store_pack<T, V>(grad_residual, i, gated);
    if (grad_input != nullptr) store_pack<T, V>(grad_input, i, pack_from_floats<T, V>(dx));
  }
}

// Block: pack_tile's; grid: the packs across, and enough row slices for about
// kPassRowsPerThread rows per thread.
struct PassGeometry {
  dim3 grid, block;
};

inline PassGeometry pass_geometry(std::int64_t rows, std::int64_t channels, int width) {
  const PackTile t = pack_tile(channels, width, kPassThreads);
  const std::int64_t slices =
      std::clamp<std::int64_t>((rows + t.ty * kPassRowsPerThread - 1) / (t.ty * kPassRowsPerThread), 1, 65535);
  return {dim3(static_cast<unsigned>(t.across), static_cast<unsigned>(slices)), dim3(t.tx, t.ty)};
}

}  // namespace sublet::ops::cuda::batch_norm_detail
