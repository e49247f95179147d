// Layer norm on CUDA: rows that fit a warp's registers take the warp-per-row kernels (16-byte
// packs where the width and the pointers allow), wider ones the block-per-row kernels. Backward
// computes the input gradient and the weight/bias partial sums in one pass over the rows; a
// finish kernel adds the partials in a fixed order (deterministic).
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "core/errors.h"
#include "core/tuning.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/layer_norm_block_rows.cuh"
#include "ops/cuda/layer_norm_cuda.h"
#include "ops/cuda/layer_norm_warp_rows.cuh"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

using namespace layer_norm_detail;

constexpr int kMaxChunks = 8;    // packs per lane of the warp kernels
constexpr int kMaxPerLane = 32;  // elements per lane of the warp kernels
constexpr std::int64_t kMaxBackwardBlocks = 512;  // row blocks of the fused backward (partial rows)
constexpr int kFinishColumns = 32, kFinishSlices = 16;

// Column c's weight/bias gradient: the sum of partial rows 0..parts-1 in a fixed order
// (slice-wise, then the slices in order).
template <typename T>
__global__ void affine_grad_finish(std::int64_t parts, std::int64_t cols, const Acc<T>* partial_weight,
                                   const Acc<T>* partial_bias, T* grad_weight, T* grad_bias) {
  using A = Acc<T>;
  __shared__ A slice_w[kFinishSlices][kFinishColumns + 1], slice_b[kFinishSlices][kFinishColumns + 1];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kFinishColumns + threadIdx.x;
  A sum_w = 0, sum_b = 0;
  if (c < cols) {
    for (std::int64_t p = threadIdx.y; p < parts; p += kFinishSlices) {
      sum_w += partial_weight[p * cols + c];
      sum_b += partial_bias[p * cols + c];
    }
  }
  slice_w[threadIdx.y][threadIdx.x] = sum_w;
  slice_b[threadIdx.y][threadIdx.x] = sum_b;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  for (int s = 1; s < kFinishSlices; ++s) {
    sum_w += slice_w[s][threadIdx.x];
    sum_b += slice_b[s][threadIdx.x];
  }
  if (grad_weight != nullptr) grad_weight[c] = store_as<T>(sum_w);
  if (grad_bias != nullptr) grad_bias[c] = store_as<T>(sum_b);
}

bool aligned(const void* p, std::size_t bytes) {
  return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Calls launch(integral_constant<V>, integral_constant<CHUNKS>) for the warp kernels' pack width
// and the fewest chunks (of 1, 2, 3, 4, 6, 8) covering cols, at most kMaxPerLane elements per
// lane (the backward holds three times that in registers); false where the row is too wide for
// packs (or they are not aligned) and for single elements.
template <int kVec, typename Launch>
bool launch_warp_rows(std::int64_t cols, bool packs_aligned, Launch&& launch) {
  if (!tuning().fused_layer_norm) return false;  // switched off for comparisons: block per row
  auto by_chunks = [&](auto vec) {
    constexpr int V = decltype(vec)::value;
    constexpr int kMax = kMaxPerLane / V < kMaxChunks ? kMaxPerLane / V : kMaxChunks;
    const std::int64_t needed = (cols + 32 * V - 1) / (32 * V);
    if (needed > kMax) return false;
    auto chunks = [&](auto c) {
      if constexpr (decltype(c)::value <= kMax) launch(vec, c);
    };
    if (needed <= 1) chunks(std::integral_constant<int, 1>{});
    else if (needed <= 2) chunks(std::integral_constant<int, 2>{});
    else if (needed <= 3) chunks(std::integral_constant<int, 3>{});
    else if (needed <= 4) chunks(std::integral_constant<int, 4>{});
    else if (needed <= 6) chunks(std::integral_constant<int, 6>{});
    else chunks(std::integral_constant<int, 8>{});
    return true;
  };
  if (packs_aligned && cols % kVec == 0 && by_chunks(std::integral_constant<int, kVec>{})) return true;
  return by_chunks(std::integral_constant<int, 1>{});
}

template <typename TX, typename TY>
void forward_typed(const Context& ctx, const LayerNormForwardArgs& a) {
  using A = Acc<TX>;
  const LayerNormShape& s = a.shape;
  const cudaStream_t stream = stream_of(ctx.stream);
  constexpr int kVec = 16 / sizeof(TX);
  const auto* x = static_cast<const TX*>(a.input);
  const auto* h = static_cast<const TY*>(a.branch);
  const auto* w = static_cast<const TX*>(a.weight);
  const auto* b = static_cast<const TX*>(a.bias);
  auto* sum = static_cast<TX*>(a.sum);
  auto* y = static_cast<TY*>(a.output);
  auto* mean = static_cast<A*>(a.mean);
  auto* rstd = static_cast<A*>(a.rstd);
  const A eps = static_cast<A>(a.eps);
  const bool packs_aligned = aligned(x, 16) && aligned(h, kVec * sizeof(TY)) && aligned(w, 16) && aligned(b, 16) &&
                             aligned(sum, 16) && aligned(y, kVec * sizeof(TY));
  const bool warp_rows = launch_warp_rows<kVec>(s.cols, packs_aligned, [&](auto vec, auto chunks) {
    constexpr int V = decltype(vec)::value, C = decltype(chunks)::value;
    const std::int64_t blocks = (s.rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (blocks > 0x7fffffff) throw ShapeError("layer_norm: too many rows for one call on CUDA");
    forward_warp_rows<TX, TY, V, C><<<static_cast<unsigned>(blocks), kWarpRowThreads, 0, stream>>>(
        s.rows, static_cast<int>(s.cols), x, h, w, b, eps, sum, y, mean, rstd);
    SUBLET_CUDA_LAUNCH_CHECK(layer_norm_forward_warp_rows);
  });
  if (warp_rows) return;
  if (s.rows > 0x7fffffff) throw ShapeError("layer_norm: at most 2^31 - 1 rows per call on CUDA");
  forward_block_rows<TX, TY><<<static_cast<unsigned>(s.rows), kRowThreads, 0, stream>>>(s.cols, x, h, w, b, eps, sum,
                                                                                     y, mean, rstd);
  SUBLET_CUDA_LAUNCH_CHECK(layer_norm_forward_block_rows);
}

template <typename TX, typename TY>
void backward_typed(const Context& ctx, const LayerNormBackwardArgs& a) {
  using A = Acc<TX>;
  const LayerNormShape& s = a.shape;
  const cudaStream_t stream = stream_of(ctx.stream);
  constexpr int kVec = 16 / sizeof(TX);
  const auto* dy = static_cast<const TY*>(a.grad_output);
  const auto* dsum = static_cast<const TX*>(a.grad_sum);
  const auto* x = static_cast<const TX*>(a.input);
  const auto* w = static_cast<const TX*>(a.weight);
  const auto* mu = static_cast<const A*>(a.mean);
  const auto* k = static_cast<const A*>(a.rstd);
  auto* dx = static_cast<TX*>(a.grad_input);
  auto* dh = static_cast<TY*>(a.grad_branch);
  const bool affine = a.grad_weight != nullptr || a.grad_bias != nullptr;
  if (dx == nullptr && !affine) return;
  const bool packs_aligned = aligned(dy, kVec * sizeof(TY)) && aligned(dsum, 16) && aligned(x, 16) &&
                             aligned(w, 16) && aligned(dx, 16) && aligned(dh, kVec * sizeof(TY));
  // Row blocks of the warp kernel (a fixed function of the shape, so the sums' order is too).
  const std::int64_t warp_blocks =
      std::min(kMaxBackwardBlocks, std::max<std::int64_t>(1, (s.rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const std::int64_t tiles = std::max<std::int64_t>(1, (s.rows + kRowsPerTile - 1) / kRowsPerTile);
  memory::ScopedBlock partial_weight, partial_bias;
  std::int64_t parts = 0;
  auto reserve_partials = [&](std::int64_t rows_of_partials) {
    parts = s.rows == 0 ? 0 : rows_of_partials;
    const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(parts, 1) * s.cols) * sizeof(A);
    partial_weight = ctx.workspace(bytes);
    partial_bias = ctx.workspace(bytes);
  };
  const bool warp_rows = s.rows > 0 && launch_warp_rows<kVec>(s.cols, packs_aligned, [&](auto vec, auto chunks) {
    constexpr int V = decltype(vec)::value, C = decltype(chunks)::value;
    if (affine) reserve_partials(warp_blocks);
    const std::size_t shared = affine ? 2 * static_cast<std::size_t>(s.cols) * sizeof(A) : 0;
    backward_warp_rows<TX, TY, V, C><<<static_cast<unsigned>(warp_blocks), kWarpRowThreads, shared, stream>>>(
        s.rows, static_cast<int>(s.cols), dy, dsum, x, w, mu, k, dx, dh,
        affine ? static_cast<A*>(partial_weight.get()) : nullptr, affine ? static_cast<A*>(partial_bias.get()) : nullptr);
    SUBLET_CUDA_LAUNCH_CHECK(layer_norm_backward_warp_rows);
  });
  if (!warp_rows) {
    if (dx != nullptr && s.rows > 0) {
      if (s.rows > 0x7fffffff) throw ShapeError("layer_norm_backward: at most 2^31 - 1 rows per call on CUDA");
      input_grad_block_rows<TX, TY><<<static_cast<unsigned>(s.rows), kRowThreads, 0, stream>>>(s.cols, dy, dsum, x, w,
                                                                                            mu, k, dx, dh);
      SUBLET_CUDA_LAUNCH_CHECK(layer_norm_input_grad_block_rows);
    }
    if (affine) {
      if (tiles > 65535) throw ShapeError("layer_norm_backward: at most 65535 * 64 rows per call on CUDA");
      reserve_partials(tiles);
      if (parts > 0) {
        const unsigned column_blocks = static_cast<unsigned>((s.cols + kColumnThreads - 1) / kColumnThreads);
        affine_grad_block_partials<TX, TY><<<dim3(column_blocks, static_cast<unsigned>(tiles)), kColumnThreads, 0,
                                             stream>>>(s.rows, s.cols, dy, x, mu, k,
                                                       static_cast<A*>(partial_weight.get()),
                                                       static_cast<A*>(partial_bias.get()));
        SUBLET_CUDA_LAUNCH_CHECK(layer_norm_affine_grad_block_partials);
      }
    }
  }
  if (!affine) return;
  const std::int64_t column_groups = (s.cols + kFinishColumns - 1) / kFinishColumns;
  if (column_groups > 0x7fffffff) throw ShapeError("layer_norm_backward: too many columns for one call on CUDA");
  affine_grad_finish<TX><<<static_cast<unsigned>(column_groups), dim3(kFinishColumns, kFinishSlices), 0, stream>>>(
      parts, s.cols, static_cast<const A*>(partial_weight.get()), static_cast<const A*>(partial_bias.get()),
      static_cast<TX*>(a.grad_weight), static_cast<TX*>(a.grad_bias));
  SUBLET_CUDA_LAUNCH_CHECK(layer_norm_affine_grad_finish);
}

// f(TX{}, TY{}) for the supported (dtype, output_dtype) pairs: equal, or float32 with a 16-bit output.
template <typename F>
void dispatch_pair(DType dtype, DType output_dtype, const char* op, F&& f) {
  if (dtype == output_dtype) {
    dispatch_device_floating(dtype, op, [&](auto tag) { f(tag, tag); });
    return;
  }
  if (dtype == DType::Float32 && output_dtype == DType::BFloat16) return f(float{}, __nv_bfloat16{});
  if (dtype == DType::Float32 && output_dtype == DType::Float16) return f(float{}, __half{});
  throw DTypeError(std::string(op) + ": output dtype " + dtype_name(output_dtype) + " with input dtype " +
                   dtype_name(dtype) + "; expected the input's dtype, or bfloat16/float16 for a float32 input");
}

}  // namespace

void layer_norm_fused_forward(const Context& ctx, const LayerNormForwardArgs& args) {
  if (args.shape.rows == 0) return;
  if (args.shape.cols > 0x7fffffff) throw ShapeError("layer_norm: rows of at most 2^31 - 1 elements on CUDA");
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_pair(args.dtype, args.output_dtype, "layer_norm", [&](auto tx, auto ty) {
    forward_typed<decltype(tx), decltype(ty)>(ctx, args);
  });
}

void layer_norm_fused_backward(const Context& ctx, const LayerNormBackwardArgs& args) {
  if (args.shape.cols > 0x7fffffff) throw ShapeError("layer_norm_backward: rows of at most 2^31 - 1 elements on CUDA");
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_pair(args.dtype, args.output_dtype, "layer_norm_backward", [&](auto tx, auto ty) {
    backward_typed<decltype(tx), decltype(ty)>(ctx, args);
  });
}

void layer_norm_forward(const Context& ctx, const LayerNormShape& s, DType dtype, const void* input,
                        const void* weight, const void* bias, double eps, void* output, void* mean, void* rstd) {
  LayerNormForwardArgs args;
  args.shape = s;
  args.dtype = args.output_dtype = dtype;
  args.input = input;
  args.weight = weight;
  args.bias = bias;
  args.eps = eps;
  args.output = output;
  args.mean = mean;
  args.rstd = rstd;
  cuda::layer_norm_fused_forward(ctx, args);
}

void layer_norm_backward(const Context& ctx, const LayerNormShape& s, DType dtype, const void* grad_output,
                         const void* input, const void* weight, const void* mean, const void* rstd,
                         void* grad_input, void* grad_weight, void* grad_bias) {
  LayerNormBackwardArgs args;
  args.shape = s;
  args.dtype = args.output_dtype = dtype;
  args.grad_output = grad_output;
  args.input = input;
  args.weight = weight;
  args.mean = mean;
  args.rstd = rstd;
  args.grad_input = grad_input;
  args.grad_weight = grad_weight;
  args.grad_bias = grad_bias;
  cuda::layer_norm_fused_backward(ctx, args);
}

}  // namespace sublet::ops::cuda
