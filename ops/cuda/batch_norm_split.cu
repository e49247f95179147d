// Batch norm with the per-channel reductions split over many blocks: 16-bit NCHW inputs and
// channels-last (NHWC) inputs of float32/bfloat16/float16, float32 parameters and statistics
// (ops/cuda/batch_norm_split_cuda.h). Three launches each way:
//   1. partial reductions: each block reduces a slice of each of its channels' values and writes
//      one partial per (slice, channel) to a workspace;
//   2. a per-channel combine, one block per channel, over the slices in a fixed order, which
//      also writes the statistics, the running statistics and the parameter gradients, and the
//      per-channel coefficients of step 3;
//   3. an element-wise pass (normalise, + residual, ReLU / the input gradient).
// Small channels-last tensors (up to 2,048 rows) train in one launch each way instead
// (ops/cuda/batch_norm_small_channels_last.cuh).
// Why own kernels: cuDNN's legacy batch norm has no bfloat16 and no NHWC path without layout
// transposes in its spatial mode, and the fused ReLU kernels (batch_norm_relu.cu) hold a channel
// in one block, which neither scales to large channels nor reads NHWC rows coalesced.
//
// Layout: value (r, c, i) lives at (r * C + c) * inner + i: NCHW is rows = N, inner = H*W; NHWC
// is rows = N*H*W, inner = 1. NHWC slices are tiles of rows x channel packs whose threads read
// 16 bytes of consecutive channels of a row (ops/cuda/batch_norm_reduce_packed.cuh), or, when the
// channels do not split into aligned 16-byte packs, tiles of [rows x 32 channels] whose warps
// read 32 consecutive channels; NCHW slices are runs of one channel's N*H*W values.
//
// Numerics: the statistics are Welford's running mean and sum of squared deviations in float32
// per thread, merged pairwise (Chan et al.) in float32 in the block, and combined over the slices
// in double by Chan's formula as two passes of sums (ops/cuda/batch_norm_combine.cuh); the
// backward's two sums are float32 per thread and block, double over the slices. Every
// order is fixed by the launch geometry, which depends only on the shape: repeated runs give
// identical bits.
#include "ops/cuda/batch_norm_split_cuda.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/batch_norm_accumulators.cuh"
#include "ops/cuda/batch_norm_combine.cuh"
#include "ops/cuda/batch_norm_passes_channels_last.cuh"
#include "ops/cuda/batch_norm_reduce_packed.cuh"
#include "ops/cuda/batch_norm_small_channels_last.cuh"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/int_divider.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::cuda {
namespace {

using namespace batch_norm_detail;

constexpr int kTileChannels = 32;   // NHWC block: 32 channels (one warp's row) ...
constexpr int kTileRows = 8;        // ... by 8 rows
constexpr int kPlaneThreads = 256;  // NCHW block
constexpr std::int64_t kTargetBlocks = 1024;      // about 8 resident 256-thread blocks on each of 132 SMs
constexpr std::int64_t kMinValuesPerThread = 16;  // a slice gives each thread at least this many values
constexpr std::int64_t kMaxSlices = 65535;        // gridDim.y

// ---- what the reductions read -----------------------------------------------------------------

template <typename T>
struct StatsSource {  // forward: the input's values
  using Fixed = float;  // nothing per channel
  const T* input;
  __device__ Fixed fixed(std::int64_t) const { return 0.0f; }
  __device__ void push(Welford& acc, std::int64_t offset, Fixed) const { push_value(acc, load_compute(input[offset])); }
};

template <typename T>
struct GradSource {  // backward: g (masked where the fused ReLU did not pass it) and g * (x - centre)
  struct Fixed {  // the channel's centre, and the forward's scale and shift where mask.from_input
    float centre, scale, shift;
  };
  const T* grad_output;
  const T* input;
  const float* centres;  // save_mean (training) or running_mean (eval)
  ReluMask<T> mask;
  __device__ Fixed fixed(std::int64_t c) const {
    return mask.from_input ? Fixed{centres[c], mask.scale(c), mask.shift(c)} : Fixed{centres[c], 0.0f, 0.0f};
  }
  __device__ void push(GradSums& acc, std::int64_t offset, const Fixed& f) const {
    float g = load_compute(grad_output[offset]);
    const float x = load_compute(input[offset]);
    if (mask.output != nullptr && !is_positive(mask.output[offset])) g = 0.0f;
    if (mask.from_input && !relu_passed_from_input<T>(x, f.centre, f.scale, f.shift)) g = 0.0f;
    acc.g += g;
    acc.g_centred += g * (x - f.centre);
  }
};

// ---- partial reductions -----------------------------------------------------------------------

// NHWC: block (32, 8) over channels [blockIdx.x * 32, +32) and rows blockIdx.y * 8 + k * 8 * gridDim.y.
template <typename Acc, typename Source>
__global__ void __launch_bounds__(kTileChannels* kTileRows)
    reduce_channels_last(std::int64_t rows, std::int64_t channels, Source source, Acc* partials) {
  __shared__ Acc shared[kTileChannels * kTileRows];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kTileChannels + threadIdx.x;
  Acc acc{};
  if (c < channels) {
    const auto fixed = source.fixed(c);
    const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * kTileRows;
    for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * kTileRows + threadIdx.y; r < rows; r += step) {
      source.push(acc, r * channels + c, fixed);
    }
  }
  acc = merge_group(acc, shared, threadIdx.y * kTileChannels + threadIdx.x, threadIdx.y, kTileRows, kTileChannels);
  if (threadIdx.y == 0 && c < channels) partials[static_cast<std::int64_t>(blockIdx.y) * channels + c] = acc;
}

// Value j of one channel of an NCHW tensor: sample j / inner, position j % inner.
struct PlaneIndexer {
  std::int64_t channels, inner;
  IntDivider by_inner;  // when every j fits in 32 bits (narrow), else 64-bit division
  bool narrow;
  __device__ std::int64_t operator()(std::int64_t c, std::int64_t j) const {
    std::int64_t n, i;
    if (narrow) {
      std::uint32_t q, r;
      by_inner.divmod(static_cast<std::uint32_t>(j), q, r);
      n = q;
      i = r;
    } else {
      n = j / inner;
      i = j % inner;
    }
    return (n * channels + c) * inner + i;
  }
};

// NCHW: block of 256 over channel blockIdx.x, values blockIdx.y * 256 + k * 256 * gridDim.y.
template <typename Acc, typename Source>
__global__ void __launch_bounds__(kPlaneThreads)
    reduce_planes(std::int64_t count, PlaneIndexer at, Source source, Acc* partials) {
  __shared__ Acc shared[kPlaneThreads];
  const std::int64_t c = blockIdx.x;
  const auto fixed = source.fixed(c);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * kPlaneThreads;
  Acc acc{};
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.y) * kPlaneThreads + threadIdx.x; j < count; j += step) {
    source.push(acc, at(c, j), fixed);
  }
  acc = merge_group(acc, shared, threadIdx.x, threadIdx.x, kPlaneThreads, 1);
  if (threadIdx.x == 0) partials[static_cast<std::int64_t>(blockIdx.y) * at.channels + c] = acc;
}

struct Layout {
  std::int64_t rows, channels, inner, count;  // count = values per channel = N*H*W
  bool channels_last;
  std::int64_t numel() const { return rows * channels * inner; }
};

Layout layout_of(const BatchNormShape& s) {
  const bool last = s.format == MemoryFormat::ChannelsLast;
  return {last ? s.batch * s.spatial() : s.batch, s.channels, last ? 1 : s.spatial(), s.batch * s.spatial(), last};
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// How many slices each channel's values are split into (gridDim.y of the reduction).
std::int64_t slices_for(const Layout& l) {
  const std::int64_t across = l.channels_last ? ceil_div(l.channels, kTileChannels) : l.channels;
  const std::int64_t per_block = l.channels_last ? kTileRows : kPlaneThreads;
  const std::int64_t by_work = ceil_div(l.count, per_block * kMinValuesPerThread);
  return std::clamp<std::int64_t>(std::min(ceil_div(kTargetBlocks, across), by_work), 1, kMaxSlices);
}

// Launches the partial reduction of `source` into partials[slices * C] (slices = slices_for).
template <typename Acc, typename Source>
void launch_reduce(const Layout& l, std::int64_t slices, const Source& source, Acc* partials, cudaStream_t stream) {
  if (l.channels_last) {
    const dim3 grid(static_cast<unsigned>(ceil_div(l.channels, kTileChannels)), static_cast<unsigned>(slices));
    reduce_channels_last<Acc, Source><<<grid, dim3(kTileChannels, kTileRows), 0, stream>>>(l.rows, l.channels, source,
                                                                                           partials);
    SUBLET_CUDA_LAUNCH_CHECK(batch_norm_reduce_channels_last);
    return;
  }
  const bool narrow = l.count < kIntDividerLimit;
  const PlaneIndexer at{l.channels, l.inner, narrow ? IntDivider(l.inner) : IntDivider(), narrow};
  const dim3 grid(static_cast<unsigned>(l.channels), static_cast<unsigned>(slices));
  reduce_planes<Acc, Source><<<grid, kPlaneThreads, 0, stream>>>(l.count, at, source, partials);
  SUBLET_CUDA_LAUNCH_CHECK(batch_norm_reduce_planes);
}

// Which reduction kernel serves a layout: the packed channels-last one
// (ops/cuda/batch_norm_reduce_packed.cuh) when the channels split into whole 16-byte packs and
// every pointer it reads is 16-byte aligned, else the one-value-per-thread kernels above.
struct ReducePlan {
  bool packed;
  std::int64_t slices;
  PackedGeometry geometry;  // when packed
};

template <typename T>
ReducePlan plan_reduce(const Layout& l, std::initializer_list<const void*> pointers) {
  bool packed = l.channels_last && l.channels % kPackWidth<T> == 0;
  for (const void* p : pointers) packed = packed && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  if (!packed) return {false, slices_for(l), {}};
  const PackedGeometry g = packed_geometry(l.rows, l.channels, kPackWidth<T>);
  return {true, g.slices, g};
}

template <typename Source>
void launch_reduce_packed(const Layout& l, const PackedGeometry& g, const Source& source,
                          typename Source::Partial* partials, cudaStream_t stream) {
  reduce_channels_last_packed<Source><<<g.grid, g.block, 0, stream>>>(l.rows, l.channels, source, partials);
  SUBLET_CUDA_LAUNCH_CHECK(batch_norm_reduce_channels_last_packed);
}

// ---- element-wise passes ----------------------------------------------------------------------

// The channel of flat element i: (i / inner) % C, with 32-bit dividers when every i fits.
struct ChannelOf {
  std::int64_t inner, channels;
  IntDivider by_inner, by_channels;
  bool narrow;
  __device__ std::int64_t operator()(std::int64_t i) const {
    if (narrow) {
      std::uint32_t q, c;
      by_channels.divmod(by_inner.div(static_cast<std::uint32_t>(i)), q, c);
      return c;
    }
    return (i / inner) % channels;
  }
};

ChannelOf channel_of(const Layout& l) {
  const bool narrow = l.numel() < kIntDividerLimit;
  return {l.inner, l.channels, narrow ? IntDivider(l.inner) : IntDivider(),
          narrow ? IntDivider(l.channels) : IntDivider(), narrow};
}

// The passes below move V elements per 16-byte load or store (ops/cuda/vector_pack.cuh) where
// the layout lets a pack's elements share one channel (NCHW: inner % V == 0) or be V consecutive
// channels (channels-last: channels % V == 0) and every pointer is 16-byte aligned (vector_width
// below): one element per load and store leaves a pass far below the memory bandwidth.

// lane_channels: the pack's elements are consecutive channels (channels-last), else one channel.
template <typename T, int V>
__global__ void normalize(std::int64_t numel, ChannelOf channel, bool lane_channels, const Coefficients* coefficients,
                          const T* input, const T* residual, bool relu, T* output) {
  for (std::int64_t p = global_thread_index(); p * V < numel; p += grid_threads()) {
    const std::int64_t i = p * V;
    const std::int64_t c0 = channel(i);
    const Pack<T, V> x = load_pack<T, V>(input, i);
    Pack<T, V> r{};
    if (residual != nullptr) r = load_pack<T, V>(residual, i);
    float y[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const Coefficients k = coefficients[lane_channels ? c0 + j : c0];
      y[j] = normalized_value(load_compute(x.v[j]), k.centre, k.scale, k.shift, residual != nullptr,
                              load_compute(r.v[j]), relu);
    }
    store_pack<T, V>(output, i, pack_from_floats<T, V>(y));
  }
}

// training: the batch-statistics gradient; else dx = scale * g (input not read).
// The ReLU's mask: from relu_output where given, else from x and the coefficients' centre, scale
// and shift where mask_from_input (the forward's: combine_gradients), else every value passes.
template <typename T, int V>
__global__ void input_gradient(std::int64_t numel, ChannelOf channel, bool lane_channels,
                               const Coefficients* coefficients, const T* grad_output, const T* input,
                               const T* relu_output, bool mask_from_input, bool training, T* grad_input,
                               T* grad_residual) {
  for (std::int64_t p = global_thread_index(); p * V < numel; p += grid_threads()) {
    const std::int64_t i = p * V;
    const std::int64_t c0 = channel(i);
    const Pack<T, V> g = load_pack<T, V>(grad_output, i);
    Pack<T, V> kept{}, x{}, gated = g;  // gated: g where the ReLU passed it, else 0
    if (relu_output != nullptr) kept = load_pack<T, V>(relu_output, i);
    if ((grad_input != nullptr && training) || mask_from_input) x = load_pack<T, V>(input, i);
    float dx[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const Coefficients k = coefficients[lane_channels ? c0 + j : c0];
      const bool passed = mask_from_input ? relu_passed_from_input<T>(load_compute(x.v[j]), k.centre, k.scale, k.shift)
                                          : relu_output == nullptr || is_positive(kept.v[j]);
      if (!passed) gated.v[j] = store_compute<T>(0.0f);
      const float gv = passed ? load_compute(g.v[j]) : 0.0f;
      dx[j] = input_gradient_value(gv, load_compute(x.v[j]), k.centre, k.scale, k.grad_mean, k.xhat_factor, training);
    }
    if (grad_residual != nullptr) store_pack<T, V>(grad_residual, i, gated);
    if (grad_input != nullptr) store_pack<T, V>(grad_input, i, pack_from_floats<T, V>(dx));
  }
}

// Calls launch(std::integral_constant<int, V>) with the widest pack the layout and pointers allow.
template <typename T, typename Launch>
void with_vector_width(const Layout& l, std::initializer_list<const void*> pointers, Launch&& launch) {
  constexpr int kWide = static_cast<int>(16 / sizeof(T));
  bool wide = l.channels_last ? l.channels % kWide == 0 : l.inner % kWide == 0;
  for (const void* p : pointers) wide = wide && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  if (wide) {
    launch(std::integral_constant<int, kWide>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

template <typename T>
void launch_normalize(const Layout& l, const Coefficients* k, const T* input, const T* residual, bool relu, T* output,
                      cudaStream_t stream) {
  with_vector_width<T>(l, {input, residual, output}, [&](auto width) {
    constexpr int V = decltype(width)::value;
    if (V > 1 && l.channels_last) {
      const PassGeometry g = pass_geometry(l.rows, l.channels, V);
      normalize_channels_last<T, V><<<g.grid, g.block, 0, stream>>>(l.rows, l.channels, k, input, residual, relu,
                                                                    output);
      return;
    }
    normalize<T, V><<<grid_for(l.numel() / V), kBlockThreads, 0, stream>>>(l.numel(), channel_of(l),
                                                                            l.channels_last, k, input, residual, relu,
                                                                            output);
  });
  SUBLET_CUDA_LAUNCH_CHECK(batch_norm_normalize);
}

// ---- host side --------------------------------------------------------------------------------

// The one-launch kernels' conditions on the layout (the dtype's pack width V = 16 / element size).
bool small_layout_fits(const Layout& l, std::int64_t pack_width) {
  return l.channels_last && l.channels % pack_width == 0 && l.rows >= 1 &&
         l.rows <= kSmallRowsPerThread * kSmallThreads && l.numel() < kIntDividerLimit;
}

template <typename T>
bool small_fits(const Layout& l, std::initializer_list<const void*> pointers) {
  bool fits = small_layout_fits(l, kPackWidth<T>);
  for (const void* p : pointers) fits = fits && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  return fits;
}

unsigned channel_blocks(std::int64_t channels) { return grid_for(channels); }

template <typename Acc>
memory::ScopedBlock partial_workspace(const Context& ctx, std::int64_t slices, std::int64_t channels) {
  return ctx.workspace(static_cast<std::size_t>(slices * channels) * sizeof(Acc));
}

template <typename T>
void forward_training(const Context& ctx, const BatchNormShape& s, const T* input, const T* residual, bool relu,
                      const float* weight, const float* bias, float* running_mean, float* running_var,
                      double momentum, double eps, T* output, float* save_mean, float* save_invstd,
                      std::int64_t* num_batches_tracked) {
  const Layout l = layout_of(s);
  const cudaStream_t stream = stream_of(ctx.stream);
  if (small_fits<T>(l, {input, residual, output})) {
    constexpr int V = kPackWidth<T>;
    small_forward_channels_last<T, V><<<static_cast<unsigned>(l.channels / V), kSmallThreads, 0, stream>>>(
        static_cast<int>(l.rows), static_cast<int>(l.channels), input, residual, relu, weight, bias, running_mean,
        running_var, momentum, eps, output, save_mean, save_invstd, num_batches_tracked);
    SUBLET_CUDA_LAUNCH_CHECK(batch_norm_small_forward_channels_last);
    return;
  }
  const ReducePlan plan = plan_reduce<T>(l, {input});
  const std::int64_t slices = plan.slices;
  memory::ScopedBlock partials = partial_workspace<Welford>(ctx, slices, l.channels);
  memory::ScopedBlock coefficients = ctx.workspace(static_cast<std::size_t>(l.channels) * sizeof(Coefficients));
  auto* k = static_cast<Coefficients*>(coefficients.get());
  auto* welford = static_cast<Welford*>(partials.get());
  if (plan.packed) {
    launch_reduce_packed(l, plan.geometry, StatsPackSource<T, kPackWidth<T>>{input}, welford, stream);
  } else {
    launch_reduce(l, slices, StatsSource<T>{input}, welford, stream);
  }
  combine_statistics<<<combine_blocks(l.channels), kCombineThreads, 0, stream>>>(
      l.channels, slices, static_cast<const Welford*>(partials.get()), static_cast<double>(l.count), momentum, eps,
      weight, bias, running_mean, running_var, save_mean, save_invstd, k, num_batches_tracked);
  SUBLET_CUDA_LAUNCH_CHECK(batch_norm_combine_statistics);
  launch_normalize<T>(l, k, input, residual, relu, output, stream);
}

template <typename T>
void forward_eval(const Context& ctx, const BatchNormShape& s, const T* input, const float* weight, const float* bias,
                  const float* running_mean, const float* running_var, double eps, T* output) {
  const Layout l = layout_of(s);
  const cudaStream_t stream = stream_of(ctx.stream);
  memory::ScopedBlock coefficients = ctx.workspace(static_cast<std::size_t>(l.channels) * sizeof(Coefficients));
  auto* k = static_cast<Coefficients*>(coefficients.get());
  eval_coefficients<<<channel_blocks(l.channels), kBlockThreads, 0, stream>>>(l.channels, weight, bias, running_mean,
                                                                              running_var, eps, k);
  SUBLET_CUDA_LAUNCH_CHECK(batch_norm_eval_coefficients);
  launch_normalize<T>(l, k, input, static_cast<const T*>(nullptr), false, output, stream);
}

// Training: centres = save_mean, invstd = save_invstd. Eval: centres = running_mean, and
// running_var + eps give invstd. relu_output: the fused forward's output (nullptr: no ReLU).
// mask_from_input (training, a forward without a residual, whose bias was `bias`): the ReLU's
// mask is recomputed from the input instead of read from relu_output. relu_output still picks
// the kernels by its alignment, so that both ways run the same ones and give the same bits.
template <typename T>
void backward(const Context& ctx, const BatchNormShape& s, bool training, const T* grad_output, const T* input,
              const T* relu_output, bool mask_from_input, const float* weight, const float* bias,
              const float* centres, const float* save_invstd, const float* running_var, double eps, T* grad_input,
              float* grad_weight, float* grad_bias, T* grad_residual) {
  if (grad_input == nullptr && grad_weight == nullptr && grad_bias == nullptr && grad_residual == nullptr) return;
  const Layout l = layout_of(s);
  const cudaStream_t stream = stream_of(ctx.stream);
  const bool from_input = mask_from_input && training && relu_output != nullptr;
  const ReluMask<T> mask = from_input ? ReluMask<T>{nullptr, true, save_invstd, weight, bias}
                                      : ReluMask<T>{relu_output, false, nullptr, nullptr, nullptr};
  if (training && small_fits<T>(l, {grad_output, input, relu_output, grad_input, grad_residual})) {
    constexpr int V = kPackWidth<T>;
    small_backward_channels_last<T, V><<<static_cast<unsigned>(l.channels / V), kSmallThreads, 0, stream>>>(
        static_cast<int>(l.rows), static_cast<int>(l.channels), grad_output, input, mask, weight, centres,
        save_invstd, grad_input, grad_weight, grad_bias, grad_residual);
    SUBLET_CUDA_LAUNCH_CHECK(batch_norm_small_backward_channels_last);
    return;
  }
  // The sums feed grad_weight, grad_bias and (training only) grad_input.
  const bool need_sums = grad_weight != nullptr || grad_bias != nullptr || (training && grad_input != nullptr);
  const ReducePlan plan = need_sums ? plan_reduce<T>(l, {grad_output, input, relu_output}) : ReducePlan{false, 0, {}};
  const std::int64_t slices = plan.slices;
  memory::ScopedBlock partials;
  if (need_sums) {
    partials = partial_workspace<GradSums>(ctx, slices, l.channels);
    auto* sums = static_cast<GradSums*>(partials.get());
    if (plan.packed) {
      launch_reduce_packed(l, plan.geometry,
                           GradPackSource<T, kPackWidth<T>>{grad_output, input, centres, mask}, sums, stream);
    } else {
      launch_reduce(l, slices, GradSource<T>{grad_output, input, centres, mask}, sums, stream);
    }
  }
  memory::ScopedBlock coefficients = ctx.workspace(static_cast<std::size_t>(l.channels) * sizeof(Coefficients));
  auto* k = static_cast<Coefficients*>(coefficients.get());
  combine_gradients<<<combine_blocks(l.channels), kCombineThreads, 0, stream>>>(
      l.channels, slices, static_cast<const GradSums*>(partials.get()), static_cast<double>(l.count), training,
      weight, from_input ? bias : nullptr, centres, save_invstd, running_var, eps, grad_weight, grad_bias, k);
  SUBLET_CUDA_LAUNCH_CHECK(batch_norm_combine_gradients);
  if (grad_input == nullptr && grad_residual == nullptr) return;
  with_vector_width<T>(l, {grad_output, input, relu_output, grad_input, grad_residual}, [&](auto width) {
    constexpr int V = decltype(width)::value;
    if (V > 1 && l.channels_last) {
      const PassGeometry g = pass_geometry(l.rows, l.channels, V);
      input_gradient_channels_last<T, V><<<g.grid, g.block, 0, stream>>>(
          l.rows, l.channels, k, grad_output, input, mask.output, from_input, training, grad_input, grad_residual);
      return;
    }
    input_gradient<T, V><<<grid_for(l.numel() / V), kBlockThreads, 0, stream>>>(
        l.numel(), channel_of(l), l.channels_last, k, grad_output, input, mask.output, from_input, training,
        grad_input, grad_residual);
  });
  SUBLET_CUDA_LAUNCH_CHECK(batch_norm_input_gradient);
}

// The storage types these kernels serve: bfloat16 and float16 in either layout, float32
// channels-last (float32/float64 NCHW have cuDNN and batch_norm_relu.cu).
template <typename Run>
void by_dtype(const char* op, const BatchNormShape& s, DType dtype, Run&& run) {
  const bool last = s.format == MemoryFormat::ChannelsLast;
  if (dtype == DType::BFloat16) return run(__nv_bfloat16{});
  if (dtype == DType::Float16) return run(__half{});
  if (dtype == DType::Float32 && last) return run(float{});
  throw DTypeError(std::string(op) + ": the split CUDA kernels take bfloat16 or float16 inputs" +
                   (last ? ", or float32 channels-last," : "") + " with float32 parameters; got " +
                   dtype_name(dtype) + (last ? " channels-last" : ""));
}

const float* f32(const void* p) { return static_cast<const float*>(p); }
float* f32(void* p) { return static_cast<float*>(p); }

}  // namespace

bool split_batch_norm_takes_one_launch(const BatchNormShape& s, DType dtype) {
  const bool served = dtype == DType::BFloat16 || dtype == DType::Float16 || dtype == DType::Float32;
  return served && small_layout_fits(layout_of(s), static_cast<std::int64_t>(16 / element_size(dtype)));
}

void split_batch_norm_forward_training_counting(const Context& ctx, const BatchNormShape& s, DType dtype,
                                                const void* input, const void* weight, const void* bias,
                                                void* running_mean, void* running_var, double momentum, double eps,
                                                void* output, void* save_mean, void* save_invstd,
                                                std::int64_t* num_batches_tracked) {
  memory::CudaDeviceGuard device(ctx.device);
  by_dtype("batch_norm", s, dtype, [&](auto tag) {
    using T = decltype(tag);
    forward_training<T>(ctx, s, static_cast<const T*>(input), nullptr, false, f32(weight), f32(bias),
                        f32(running_mean), f32(running_var), momentum, eps, static_cast<T*>(output), f32(save_mean),
                        f32(save_invstd), num_batches_tracked);
  });
}

void split_batch_norm_forward_training(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input,
                                       const void* weight, const void* bias, void* running_mean, void* running_var,
                                       double momentum, double eps, void* output, void* save_mean,
                                       void* save_invstd) {
  split_batch_norm_forward_training_counting(ctx, s, dtype, input, weight, bias, running_mean, running_var, momentum,
                                             eps, output, save_mean, save_invstd, nullptr);
}

void split_batch_norm_forward_eval(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input,
                                   const void* weight, const void* bias, const void* running_mean,
                                   const void* running_var, double eps, void* output) {
  memory::CudaDeviceGuard device(ctx.device);
  by_dtype("batch_norm", s, dtype, [&](auto tag) {
    using T = decltype(tag);
    forward_eval<T>(ctx, s, static_cast<const T*>(input), f32(weight), f32(bias), f32(running_mean),
                    f32(running_var), eps, static_cast<T*>(output));
  });
}

void split_batch_norm_backward_training(const Context& ctx, const BatchNormShape& s, DType dtype,
                                        const void* grad_output, const void* input, const void* weight,
                                        const void* save_mean, const void* save_invstd, void* grad_input,
                                        void* grad_weight, void* grad_bias) {
  memory::CudaDeviceGuard device(ctx.device);
  by_dtype("batch_norm", s, dtype, [&](auto tag) {
    using T = decltype(tag);
    backward<T>(ctx, s, true, static_cast<const T*>(grad_output), static_cast<const T*>(input), nullptr, false,
                f32(weight), nullptr, f32(save_mean), f32(save_invstd), nullptr, 0.0, static_cast<T*>(grad_input),
                f32(grad_weight), f32(grad_bias), nullptr);
  });
}

void split_batch_norm_backward_eval(const Context& ctx, const BatchNormShape& s, DType dtype,
                                    const void* grad_output, const void* input, const void* weight,
                                    const void* running_mean, const void* running_var, double eps, void* grad_input,
                                    void* grad_weight, void* grad_bias) {
  memory::CudaDeviceGuard device(ctx.device);
  by_dtype("batch_norm", s, dtype, [&](auto tag) {
    using T = decltype(tag);
    backward<T>(ctx, s, false, static_cast<const T*>(grad_output), static_cast<const T*>(input), nullptr, false,
                f32(weight), nullptr, f32(running_mean), nullptr, f32(running_var), eps,
                static_cast<T*>(grad_input), f32(grad_weight), f32(grad_bias), nullptr);
  });
}

void split_batch_norm_relu_forward_training_counting(const Context& ctx, const BatchNormShape& s, DType dtype,
                                                     const void* input, const void* residual, const void* weight,
                                                     const void* bias, void* running_mean, void* running_var,
                                                     double momentum, double eps, void* output, void* save_mean,
                                                     void* save_invstd, std::int64_t* num_batches_tracked) {
  memory::CudaDeviceGuard device(ctx.device);
  by_dtype("batch_norm_relu", s, dtype, [&](auto tag) {
    using T = decltype(tag);
    forward_training<T>(ctx, s, static_cast<const T*>(input), static_cast<const T*>(residual), true, f32(weight),
                        f32(bias), f32(running_mean), f32(running_var), momentum, eps, static_cast<T*>(output),
                        f32(save_mean), f32(save_invstd), num_batches_tracked);
  });
}

void split_batch_norm_relu_forward_training(const Context& ctx, const BatchNormShape& s, DType dtype,
                                            const void* input, const void* residual, const void* weight,
                                            const void* bias, void* running_mean, void* running_var, double momentum,
                                            double eps, void* output, void* save_mean, void* save_invstd) {
  split_batch_norm_relu_forward_training_counting(ctx, s, dtype, input, residual, weight, bias, running_mean,
                                                  running_var, momentum, eps, output, save_mean, save_invstd, nullptr);
}

void split_batch_norm_relu_backward_training(const Context& ctx, const BatchNormShape& s, DType dtype,
                                             const void* grad_output, const void* output, const void* input,
                                             const void* weight, const void* save_mean, const void* save_invstd,
                                             void* grad_input, void* grad_weight, void* grad_bias,
                                             void* grad_residual) {
  memory::CudaDeviceGuard device(ctx.device);
  by_dtype("batch_norm_relu", s, dtype, [&](auto tag) {
    using T = decltype(tag);
    backward<T>(ctx, s, true, static_cast<const T*>(grad_output), static_cast<const T*>(input),
                static_cast<const T*>(output), false, f32(weight), nullptr, f32(save_mean), f32(save_invstd),
                nullptr, 0.0, static_cast<T*>(grad_input), f32(grad_weight), f32(grad_bias),
                static_cast<T*>(grad_residual));
  });
}

void split_batch_norm_relu_backward_training_input_mask(const Context& ctx, const BatchNormShape& s, DType dtype,
                                                        const void* grad_output, const void* output,
                                                        const void* input, const void* weight, const void* bias,
                                                        const void* save_mean, const void* save_invstd,
                                                        void* grad_input, void* grad_weight, void* grad_bias) {
  memory::CudaDeviceGuard device(ctx.device);
  by_dtype("batch_norm_relu", s, dtype, [&](auto tag) {
    using T = decltype(tag);
    backward<T>(ctx, s, true, static_cast<const T*>(grad_output), static_cast<const T*>(input),
                static_cast<const T*>(output), true, f32(weight), f32(bias), f32(save_mean), f32(save_invstd),
                nullptr, 0.0, static_cast<T*>(grad_input), f32(grad_weight), f32(grad_bias), nullptr);
  });
}

}  // namespace sublet::ops::cuda
