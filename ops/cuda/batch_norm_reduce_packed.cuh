#pragma once
// The channels-last per-channel reductions of ops/cuda/batch_norm_split.cu with V consecutive
// channels per thread (one 16-byte load per row: V = 8 for 16-bit types, 4 for float32). The
// one-channel-per-thread kernel (for channels that do not split into packs) reads 2 bytes per
// thread per load, too little to keep the memory busy on a large step's activations.
//
// Geometry: a block of 256 threads is tx channel packs (a power of two up to 32, so a warp reads
// up to 512 contiguous bytes of a row) by ty = 256 / tx rows; blockIdx.x picks tx packs,
// blockIdx.y a slice of the rows (rows blockIdx.y * ty + k * ty * gridDim.y). Each block writes
// one partial per (slice, channel) in the scalar accumulators' layout, so the per-channel
// combines are shared with the scalar kernels. Every order depends only on the shape: repeated
// runs give identical bits.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/batch_norm_accumulators.cuh"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::cuda::batch_norm_detail {

inline constexpr int kPackedThreads = 256;
inline constexpr std::int64_t kPackedTargetBlocks = 1024;  // about 8 resident blocks on each of 132 SMs
inline constexpr std::int64_t kPackedMinRows = 8;          // rows per thread at least, when rows allow
inline constexpr int kPackedUnroll = 4;                    // rows loaded before any is accumulated

template <typename T>
inline constexpr int kPackWidth = static_cast<int>(16 / sizeof(T));

template <typename T, int V>
struct StatsPackSource {  // forward: the input's values
  using Acc = WelfordPack<V>;
  using Partial = Welford;
  static constexpr int kWidth = V;
  struct Row {
    Pack<T, V> x;
  };
  struct Fixed {};  // nothing per channel
  const T* input;
  __device__ Fixed fixed(std::int64_t) const { return {}; }
  __device__ Row load(std::int64_t offset) const { return {load_pack<T, V>(input, offset)}; }
  __device__ void push(Acc& acc, const Row& row, const Fixed&) const {
    float x[V];
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] = load_compute(row.x.v[j]);
    push_values(acc, x);
  }
};

template <typename T, int V>
struct GradPackSource {  // backward: g (masked where the fused ReLU did not pass it) and g * (x - centre)
  using Acc = GradSumsPack<V>;
  using Partial = GradSums;
  static constexpr int kWidth = V;
  struct Row {
    Pack<T, V> g, x, kept;
  };
  struct Fixed {  // the pack's channels: centres, and the forward's scale and shift where mask.from_input
    float centre[V], scale[V], shift[V];
  };
  const T* grad_output;
  const T* input;
  const float* centres_;  // save_mean (training) or running_mean (eval)
  ReluMask<T> mask;
  __device__ Fixed fixed(std::int64_t c0) const {
    Fixed f{};
#pragma unroll
    for (int j = 0; j < V; ++j) {
      f.centre[j] = centres_[c0 + j];
      if (mask.from_input) f.scale[j] = mask.scale(c0 + j), f.shift[j] = mask.shift(c0 + j);
    }
    return f;
  }
  __device__ Row load(std::int64_t offset) const {
    Row row;
    row.g = load_pack<T, V>(grad_output, offset);
    row.x = load_pack<T, V>(input, offset);
    if (mask.output != nullptr) row.kept = load_pack<T, V>(mask.output, offset);
    return row;
  }
  __device__ void push(Acc& acc, const Row& row, const Fixed& f) const {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float g = load_compute(row.g.v[j]);
      const float x = load_compute(row.x.v[j]);
      if (mask.output != nullptr && !is_positive(row.kept.v[j])) g = 0.0f;
      if (mask.from_input && !relu_passed_from_input<T>(x, f.centre[j], f.scale[j], f.shift[j])) g = 0.0f;
      acc.g[j] += g;
      acc.g_centred[j] += g * (x - f.centre[j]);
    }
  }
};

template <typename Source>
__global__ void __launch_bounds__(kPackedThreads)
    reduce_channels_last_packed(std::int64_t rows, std::int64_t channels, Source source,
                                typename Source::Partial* partials) {
  using Acc = typename Source::Acc;
  constexpr int V = Source::kWidth;
  __shared__ Acc shared[kPackedThreads];
  const std::int64_t c0 = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  Acc acc{};
  if (c0 < channels) {
    const typename Source::Fixed fixed = source.fixed(c0);
    const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * blockDim.y;
    std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
    for (; r + (kPackedUnroll - 1) * step < rows; r += kPackedUnroll * step) {
      typename Source::Row row[kPackedUnroll];
#pragma unroll
      for (int u = 0; u < kPackedUnroll; ++u) row[u] = source.load((r + u * step) * channels + c0);
#pragma unroll
      for (int u = 0; u < kPackedUnroll; ++u) source.push(acc, row[u], fixed);
    }
    for (; r < rows; r += step) source.push(acc, source.load(r * channels + c0), fixed);
  }
  acc = merge_group(acc, shared, threadIdx.y * blockDim.x + threadIdx.x, threadIdx.y, blockDim.y, blockDim.x);
  if (threadIdx.y == 0 && c0 < channels) {
#pragma unroll
    for (int j = 0; j < V; ++j) partials[static_cast<std::int64_t>(blockIdx.y) * channels + c0 + j] = acc.channel(j);
  }
}

struct PackedGeometry {
  dim3 grid, block;
  std::int64_t slices;  // gridDim.y: partials per channel
};

// rows x channels values, channels % width == 0.
inline PackedGeometry packed_geometry(std::int64_t rows, std::int64_t channels, int width) {
  const PackTile t = pack_tile(channels, width, kPackedThreads);
  const std::int64_t by_work = (rows + t.ty * kPackedMinRows - 1) / (t.ty * kPackedMinRows);
  const std::int64_t by_blocks = (kPackedTargetBlocks + t.across - 1) / t.across;
  const std::int64_t slices = std::clamp<std::int64_t>(std::min(by_blocks, by_work), 1, 65535);
  return {dim3(static_cast<unsigned>(t.across), static_cast<unsigned>(slices)), dim3(t.tx, t.ty), slices};
}

}  // namespace sublet::ops::cuda::batch_norm_detail
