#include "ops/cpu/conv2d_avx2_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "ops/cpu/conv2d_avx512_tiles.h"
#include "ops/cpu/conv2d_partial_sums.h"
#include "ops/cpu/im2col_cpu.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SUBLET_CONV2D_AVX2 1
#endif

namespace sublet::ops::cpu {

namespace {

// The register tile: 3 vectors of 8 output pixels for each of 4 output channels, 12 of the 16
// AVX registers as accumulators.
constexpr std::int64_t kTilePixels = 24;
constexpr std::int64_t kTileChannels = 4;
// Below this many output pixels per plane (4 tiles) the last, partly used tile costs too much.
constexpr std::int64_t kMinPixels = 4 * kTilePixels;
// The weight gradient's tiles sum over the pixels of a plane and then reduce 12 vectors: that
// fixed cost loses to im2col + GEMM at 14x14 and wins at 28x28 (conv_cpu_bench).
constexpr std::int64_t kMinWeightGradientPixels = 16 * kTilePixels;
// The AVX-512 tiles cover up to 48 pixels; input copies are padded for whole tiles of both.
constexpr std::int64_t kTilePixels512 = 16 * kMaxTileVectors512;
constexpr std::int64_t kMarginPixels = 48;
static_assert(kMarginPixels % kTilePixels == 0 && kMarginPixels % kTilePixels512 == 0);

#ifdef SUBLET_CONV2D_AVX2

// Geometry shared by all images: output pixel p of kernel tap k reads element
// offsets[k] + p of the image's copy (see Layout), which holds zeros wherever the tap would
// read padding, so the tile needs no bounds checks.
//
// The copy holds one zero-margined version of the input group per kernel column kw: a tap
// with horizontal shift sw reads, for the output columns near the edge, flat indices that
// land in the neighbouring input row; those input columns (the last -sw, or the first sw,
// which that kw never reads otherwise) are zeroed in kw's version.
struct Layout {
  std::int64_t channels, kernel_w, pixels, plane, before, stride;
  std::vector<std::int64_t> offsets;     // per k = (c, kh, kw), as im2col's row order
  std::vector<std::int64_t> zero_first;  // per kw: input columns [zero_first, zero_last) zeroed
  std::vector<std::int64_t> zero_last;
};

// Flat index difference between the input pixel a tap reads and the output pixel.
std::int64_t tap_shift(const Conv2dShape& s, std::int64_t kh, std::int64_t kw) {
  return (kh * s.dilation_h - s.pad_h) * s.in_width + kw * s.dilation_w - s.pad_w;
}

Layout make_layout(const Conv2dShape& s) {
  Layout l;
  l.channels = s.in_channels / s.groups;
  l.kernel_w = s.kernel_w;
  l.pixels = s.out_height() * s.out_width();
  l.plane = s.in_height * s.in_width;
  std::int64_t min_shift = 0, max_shift = 0;
  for (std::int64_t kh = 0; kh < s.kernel_h; ++kh) {
    for (std::int64_t kw = 0; kw < s.kernel_w; ++kw) {
      const std::int64_t shift = tap_shift(s, kh, kw);
      min_shift = std::min(min_shift, shift);
      max_shift = std::max(max_shift, shift);
    }
  }
  // Margin for whole tiles of either kernel: 24 (AVX2) and 16, 32 or 48 (AVX-512) pixels.
  const std::int64_t tiled_pixels = (l.pixels + kMarginPixels - 1) / kMarginPixels * kMarginPixels;
  l.before = -min_shift;
  const std::int64_t after = std::max<std::int64_t>(0, tiled_pixels + max_shift - l.plane);
  l.stride = (l.before + l.plane + after + 15) / 16 * 16;
  for (std::int64_t kw = 0; kw < s.kernel_w; ++kw) {
    const std::int64_t shift_w = kw * s.dilation_w - s.pad_w;
    l.zero_first.push_back(shift_w < 0 ? std::max<std::int64_t>(s.in_width + shift_w, 0) : 0);
    l.zero_last.push_back(shift_w < 0 ? s.in_width : std::min(shift_w, s.in_width));
  }
  for (std::int64_t c = 0; c < l.channels; ++c) {
    for (std::int64_t kh = 0; kh < s.kernel_h; ++kh) {
      for (std::int64_t kw = 0; kw < s.kernel_w; ++kw) {
        l.offsets.push_back((kw * l.channels + c) * l.stride + l.before + tap_shift(s, kh, kw));
      }
    }
  }
  return l;
}

// Copies one input group of one image into the layout's KW zero-margined versions. Channel by
// channel, each plane's KW copies back to back: the plane is read from memory (or L2) once and
// from L1 for the other copies (kw outer read the whole group KW times, from L2 after the first).
// The zeros before and after each plane are the same for every image: written when margins is
// set (a thread's first item of a call; no copy writes there).
void fill_copies(const Conv2dShape& s, const Layout& l, const float* group_input, float* copies, bool margins) {
  for (std::int64_t c = 0; c < l.channels; ++c) {
    for (std::int64_t kw = 0; kw < l.kernel_w; ++kw) {
      float* plane = copies + (kw * l.channels + c) * l.stride;
      if (margins) {
        std::fill(plane, plane + l.before, 0.0f);
        std::fill(plane + l.before + l.plane, plane + l.stride, 0.0f);
      }
      std::memcpy(plane + l.before, group_input + c * l.plane, sizeof(float) * l.plane);
      const std::int64_t first = l.zero_first[kw], last = l.zero_last[kw];
      if (first >= last) continue;
      for (float* row = plane + l.before; row < plane + l.before + l.plane; row += s.in_width) {
        zero_margin(row + first, last - first);
      }
    }
  }
}

// out[j][0..count) for j < channels = bias[j] + sum over k of weights[k][j] * x[offsets[k] + i].
// weights: [depth][4]; bias: 4 values.
void tile(const float* x, const std::int64_t* offsets, std::int64_t depth, const float* weights,
          const float* bias, float* const* out, std::int64_t channels, std::int64_t count) {
  __m256 a00 = _mm256_broadcast_ss(bias), a01 = a00, a02 = a00;
  __m256 a10 = _mm256_broadcast_ss(bias + 1), a11 = a10, a12 = a10;
  __m256 a20 = _mm256_broadcast_ss(bias + 2), a21 = a20, a22 = a20;
  __m256 a30 = _mm256_broadcast_ss(bias + 3), a31 = a30, a32 = a30;
  for (std::int64_t k = 0; k < depth; ++k, weights += kTileChannels) {
    const float* from = x + offsets[k];
    const __m256 x0 = _mm256_loadu_ps(from), x1 = _mm256_loadu_ps(from + 8);
    const __m256 x2 = _mm256_loadu_ps(from + 16);
    __m256 w = _mm256_broadcast_ss(weights);
    a00 = _mm256_fmadd_ps(x0, w, a00);
    a01 = _mm256_fmadd_ps(x1, w, a01);
    a02 = _mm256_fmadd_ps(x2, w, a02);
    w = _mm256_broadcast_ss(weights + 1);
    a10 = _mm256_fmadd_ps(x0, w, a10);
    a11 = _mm256_fmadd_ps(x1, w, a11);
    a12 = _mm256_fmadd_ps(x2, w, a12);
    w = _mm256_broadcast_ss(weights + 2);
    a20 = _mm256_fmadd_ps(x0, w, a20);
    a21 = _mm256_fmadd_ps(x1, w, a21);
    a22 = _mm256_fmadd_ps(x2, w, a22);
    w = _mm256_broadcast_ss(weights + 3);
    a30 = _mm256_fmadd_ps(x0, w, a30);
    a31 = _mm256_fmadd_ps(x1, w, a31);
    a32 = _mm256_fmadd_ps(x2, w, a32);
  }
  alignas(32) float result[kTileChannels][kTilePixels];
  float* rows[kTileChannels] = {result[0], result[1], result[2], result[3]};
  const bool whole = count == kTilePixels;
  for (std::int64_t j = 0; j < kTileChannels; ++j) {
    if (whole && j < channels) rows[j] = out[j];
  }
  _mm256_storeu_ps(rows[0], a00), _mm256_storeu_ps(rows[0] + 8, a01), _mm256_storeu_ps(rows[0] + 16, a02);
  _mm256_storeu_ps(rows[1], a10), _mm256_storeu_ps(rows[1] + 8, a11), _mm256_storeu_ps(rows[1] + 16, a12);
  _mm256_storeu_ps(rows[2], a20), _mm256_storeu_ps(rows[2] + 8, a21), _mm256_storeu_ps(rows[2] + 16, a22);
  _mm256_storeu_ps(rows[3], a30), _mm256_storeu_ps(rows[3] + 8, a31), _mm256_storeu_ps(rows[3] + 16, a32);
  if (whole) return;
  for (std::int64_t j = 0; j < channels; ++j) std::memcpy(out[j], result[j], sizeof(float) * count);
}

// Horizontal sum of the 8 lanes.
float sum_lanes(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

// sums[j][i] += sum over p < count of grad[j][p] * x[offsets[i] + p], for 4 gradient rows and
// 3 taps: 12 accumulators, the 3 input vectors of a step shared by the 4 rows.
void weight_tile(const float* const* grad, const float* x, const std::int64_t* offsets,
                 std::int64_t count, float sums[kTileChannels][3]) {
  const float* x0 = x + offsets[0];
  const float* x1 = x + offsets[1];
  const float* x2 = x + offsets[2];
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
  __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
  auto step = [&](std::int64_t p, auto load_grad) {
    const __m256 v0 = _mm256_loadu_ps(x0 + p), v1 = _mm256_loadu_ps(x1 + p);
    const __m256 v2 = _mm256_loadu_ps(x2 + p);
    __m256 g = load_grad(grad[0] + p);
    a00 = _mm256_fmadd_ps(g, v0, a00);
    a01 = _mm256_fmadd_ps(g, v1, a01);
    a02 = _mm256_fmadd_ps(g, v2, a02);
    g = load_grad(grad[1] + p);
    a10 = _mm256_fmadd_ps(g, v0, a10);
    a11 = _mm256_fmadd_ps(g, v1, a11);
    a12 = _mm256_fmadd_ps(g, v2, a12);
    g = load_grad(grad[2] + p);
    a20 = _mm256_fmadd_ps(g, v0, a20);
    a21 = _mm256_fmadd_ps(g, v1, a21);
    a22 = _mm256_fmadd_ps(g, v2, a22);
    g = load_grad(grad[3] + p);
    a30 = _mm256_fmadd_ps(g, v0, a30);
    a31 = _mm256_fmadd_ps(g, v1, a31);
    a32 = _mm256_fmadd_ps(g, v2, a32);
  };
  const std::int64_t whole = count / 8 * 8;
  for (std::int64_t p = 0; p < whole; p += 8) step(p, [](const float* at) { return _mm256_loadu_ps(at); });
  if (whole < count) {
    // The last pixels: gradients past the row read as zeros (the input copy has margin there).
    alignas(32) std::int32_t lanes[8];
    for (std::int64_t i = 0; i < 8; ++i) lanes[i] = whole + i < count ? -1 : 0;
    const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    step(whole, [mask](const float* at) { return _mm256_maskload_ps(at, mask); });
  }
  const __m256 acc[kTileChannels][3] = {
      {a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22}, {a30, a31, a32}};
  for (std::int64_t j = 0; j < kTileChannels; ++j) {
    for (std::int64_t i = 0; i < 3; ++i) sums[j][i] += sum_lanes(acc[j][i]);
  }
}

// Software prefetch of the input group a thread will most likely copy next, a slice per tile
// row of work: fill_copies reads its first copy from memory (in a training step the activations
// are not in cache), and on small planes with few channels the copies are a large part of the
// forward's time. Into L2 (T1): the tiles' own data fill L1.
class NextInputPrefetch {
 public:
  NextInputPrefetch(const float* next, std::int64_t floats, std::int64_t steps)
      : at_(reinterpret_cast<const char*>(next)),
        end_(next != nullptr ? at_ + floats * static_cast<std::int64_t>(sizeof(float)) : nullptr),
        lines_per_step_(next != nullptr ? (floats * static_cast<std::int64_t>(sizeof(float)) / 64 + steps) / steps : 0) {}
  void step() {
    for (std::int64_t i = 0; i < lines_per_step_ && at_ < end_; ++i, at_ += 64) _mm_prefetch(at_, _MM_HINT_T1);
  }

 private:
  const char* at_;
  const char* end_;
  std::int64_t lines_per_step_;
};

// How both kernels split a convolution between threads. A work item is one image and group,
// or, for batches too small to occupy every thread, one tile of output channels of it (each
// such item then fills its own input copies).
struct WorkSplit {
  std::int64_t out_per_group, depth, tiles, in_image, out_image;
  int threads;
  std::int64_t tiles_per_item, items_per_group, items;

  WorkSplit(const Conv2dShape& s, const Layout& l)
      : out_per_group(s.out_channels / s.groups),
        depth(static_cast<std::int64_t>(l.offsets.size())),
        tiles((out_per_group + kTileChannels - 1) / kTileChannels),
        in_image(s.in_channels * l.plane),
        out_image(s.out_channels * l.pixels),
        threads(omp_get_max_threads()),
        tiles_per_item(s.batch >= 2 * threads ? tiles : 1),
        items_per_group((tiles + tiles_per_item - 1) / tiles_per_item),
        items(s.batch * s.groups * items_per_group) {}

  struct Item {
    std::int64_t image, group, first_tile, last_tile;
  };
  Item item(std::int64_t index, std::int64_t groups) const {
    const std::int64_t first_tile = index % items_per_group * tiles_per_item;
    return {index / (groups * items_per_group), index / items_per_group % groups, first_tile,
            std::min(tiles, first_tile + tiles_per_item)};
  }
};

#endif

}  // namespace

bool conv2d_avx2_applies(const Conv2dShape& s) {
#ifdef SUBLET_CONV2D_AVX2
  return flat_shift_applies(s) && s.out_height() * s.out_width() >= kMinPixels;
#else
  (void)s;
  return false;
#endif
}

bool conv2d_avx2_weight_gradient_applies(const Conv2dShape& s) {
  return conv2d_avx2_applies(s) && s.out_height() * s.out_width() >= kMinWeightGradientPixels;
}

void conv2d_forward_avx2(const Context& ctx, const Conv2dShape& s, const float* input,
                           const float* weight, const float* bias, float* output) {
#ifndef SUBLET_CONV2D_AVX2
  (void)ctx, (void)s, (void)input, (void)weight, (void)bias, (void)output;
  throw Error("conv2d: the AVX2 CPU kernel is not built (needs AVX2 and FMA)");
#else
  const Layout l = make_layout(s);
  const WorkSplit split(s, l);
  const std::int64_t out_per_group = split.out_per_group, depth = split.depth, tiles = split.tiles;
  const std::int64_t in_image = split.in_image, out_image = split.out_image, items = split.items;
  const int threads = split.threads;
  const bool avx512 = cpu_has_avx512();

  // Workspace: weights as [group][tile][k][4] (zeros past the last channel), biases as
  // [group][tile][4], then one set of input copies per thread.
  const std::int64_t packed_weights = s.groups * tiles * depth * kTileChannels;
  const std::int64_t packed_bias = s.groups * tiles * kTileChannels;
  const std::int64_t copies = l.kernel_w * l.channels * l.stride;
  memory::ScopedBlock workspace = ctx.workspace(
      sizeof(float) * static_cast<std::size_t>(packed_weights + packed_bias + copies * threads));
  float* weights = static_cast<float*>(workspace.get());
  float* biases = weights + packed_weights;
  float* copies_base = biases + packed_bias;
  for (std::int64_t g = 0; g < s.groups; ++g) {
    for (std::int64_t t = 0; t < tiles; ++t) {
      float* w = weights + (g * tiles + t) * depth * kTileChannels;
      for (std::int64_t j = 0; j < kTileChannels; ++j) {
        const std::int64_t oc = t * kTileChannels + j, channel = g * out_per_group + oc;
        const bool real = oc < out_per_group;
        biases[(g * tiles + t) * kTileChannels + j] = real && bias != nullptr ? bias[channel] : 0.0f;
        for (std::int64_t k = 0; k < depth; ++k) {
          w[k * kTileChannels + j] = real ? weight[channel * depth + k] : 0.0f;
        }
      }
    }
  }

#pragma omp parallel num_threads(threads) if (items > 1)
  {
    float* x = copies_base + omp_get_thread_num() * copies;
    bool margins = true;  // this thread's copies still need their zero margins
    // Dynamic: the outputs of items are disjoint, so the result does not depend on the schedule.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < items; ++item) {
      const WorkSplit::Item work = split.item(item, s.groups);
      const std::int64_t image = work.image, g = work.group, first_tile = work.first_tile, last_tile = work.last_tile;
      fill_copies(s, l, input + image * in_image + g * l.channels * l.plane, x, margins);
      margins = false;
      // The item this thread takes next, if the threads keep step (the schedule is dynamic).
      const std::int64_t next_item = item + threads;
      const WorkSplit::Item next = split.item(std::min(next_item, items - 1), s.groups);
      NextInputPrefetch prefetch(next_item < items && next.image != image ?
                                     input + next.image * in_image + next.group * l.channels * l.plane : nullptr,
                                 l.channels * l.plane, (l.pixels + kTilePixels - 1) / kTilePixels);
      auto run_tile = [&](std::int64_t t, std::int64_t p) {
        const float* w = weights + (g * tiles + t) * depth * kTileChannels;
        const float* b = biases + (g * tiles + t) * kTileChannels;
        const std::int64_t first_channel = g * out_per_group + t * kTileChannels;
        const std::int64_t channels = std::min(kTileChannels, out_per_group - t * kTileChannels);
        float* out[kTileChannels];
        for (std::int64_t j = 0; j < kTileChannels; ++j) {
          const std::int64_t channel = first_channel + std::min(j, channels - 1);
          out[j] = output + image * out_image + channel * l.pixels + p;
        }
        tile(x + p, l.offsets.data(), depth, w, b, out, channels, std::min(kTilePixels, l.pixels - p));
      };
      // Up to 48 pixels x 8 channels (two packed tiles of 4) per AVX-512 tile.
      auto run_tile512 = [&](std::int64_t t, std::int64_t quads, std::int64_t p) {
        const std::int64_t first_channel = g * out_per_group + t * kTileChannels;
        const std::int64_t channels = std::min(quads * kTileChannels, out_per_group - t * kTileChannels);
        const float* w[kMaxTileQuads512];
        const float* b[kMaxTileQuads512];
        float* out[kMaxTileQuads512 * kTileChannels];
        for (std::int64_t q = 0; q < quads; ++q) {
          w[q] = weights + (g * tiles + t + q) * depth * kTileChannels;
          b[q] = biases + (g * tiles + t + q) * kTileChannels;
        }
        for (std::int64_t j = 0; j < quads * kTileChannels; ++j) {
          const std::int64_t channel = first_channel + std::min(j, channels - 1);
          out[j] = output + image * out_image + channel * l.pixels + p;
        }
        const std::int64_t count = std::min(kTilePixels512, l.pixels - p);
        tile_avx512(static_cast<int>((count + 15) / 16), static_cast<int>(quads), x + p, l.offsets.data(), depth,
                    w, b, out, channels, count);
      };
      // Pixels outer: the input window of a pixel tile is read from L1 by every channel tile.
      if (avx512) {
        for (std::int64_t p = 0; p < l.pixels; p += kTilePixels512) {
          prefetch.step();
          prefetch.step();  // half as many pixel tiles of 48 as of 24
          for (std::int64_t t = first_tile; t < last_tile; t += kMaxTileQuads512) {
            run_tile512(t, std::min(kMaxTileQuads512, last_tile - t), p);
          }
        }
      } else {
        for (std::int64_t p = 0; p < l.pixels; p += kTilePixels) {
          prefetch.step();
          for (std::int64_t t = first_tile; t < last_tile; ++t) run_tile(t, p);
        }
      }
    }
  }
#endif
}

void conv2d_backward_weight_avx2(const Context& ctx, const Conv2dShape& s,
                                 const float* grad_output, const float* input, float* grad_weight,
                                 float* grad_bias) {
#ifndef SUBLET_CONV2D_AVX2
  (void)ctx, (void)s, (void)grad_output, (void)input, (void)grad_weight, (void)grad_bias;
  throw Error("conv2d: the AVX2 CPU kernel is not built (needs AVX2 and FMA)");
#else
  const Layout l = make_layout(s);
  const WorkSplit split(s, l);
  const std::int64_t out_per_group = split.out_per_group, depth = split.depth;
  const std::int64_t in_image = split.in_image, out_image = split.out_image, items = split.items;
  const int threads = split.threads;
  const bool avx512 = cpu_has_avx512();

  // Workspace: per thread the input copies and partial sums [weight | bias].
  const std::int64_t weight_numel = s.weight_numel();
  const std::int64_t partial = weight_numel + s.out_channels;
  const std::int64_t copies = l.kernel_w * l.channels * l.stride;
  memory::ScopedBlock workspace =
      ctx.workspace(sizeof(float) * static_cast<std::size_t>((copies + partial) * threads));
  float* copies_base = static_cast<float*>(workspace.get());
  float* partial_base = copies_base + copies * threads;
  std::fill(partial_base, partial_base + partial * threads, 0.0f);

#pragma omp parallel num_threads(threads) if (items > 1)
  {
    const int thread = omp_get_thread_num();
    float* x = copies_base + thread * copies;
    float* partial_weight = partial_base + thread * partial;
    float* partial_bias = partial_weight + weight_numel;
    bool margins = true;  // this thread's copies still need their zero margins
    // Static: which items a thread sums must not vary between runs, or the float rounding of
    // the weight gradient would.
#pragma omp for schedule(static)
    for (std::int64_t item = 0; item < items; ++item) {
      const WorkSplit::Item work = split.item(item, s.groups);
      const std::int64_t image = work.image, g = work.group, first_tile = work.first_tile, last_tile = work.last_tile;
      fill_copies(s, l, input + image * in_image + g * l.channels * l.plane, x, margins);
      margins = false;
      // AVX-512: 8 gradient rows (two tiles of 4) per register tile.
      const std::int64_t rows = avx512 ? kWeightTileRows512 : kTileChannels;
      for (std::int64_t t = first_tile; t < last_tile; t += rows / kTileChannels) {
        const std::int64_t first_channel = g * out_per_group + t * kTileChannels;
        // Only this item's tiles: with one tile per item, the next tile is another item's.
        const std::int64_t channels =
            std::min(rows, std::min(last_tile * kTileChannels, out_per_group) - t * kTileChannels);
        const float* grad[kWeightTileRows512];  // a short last tile repeats its last row
        for (std::int64_t j = 0; j < rows; ++j) {
          const std::int64_t channel = first_channel + std::min(j, channels - 1);
          grad[j] = grad_output + image * out_image + channel * l.pixels;
        }
        for (std::int64_t k = 0; k < depth; k += 3) {
          const std::int64_t taps = std::min<std::int64_t>(3, depth - k);
          // A short last group of taps repeats its last tap; those sums are dropped.
          const std::int64_t offsets[3] = {l.offsets[k], l.offsets[k + std::min<std::int64_t>(1, taps - 1)],
                                           l.offsets[k + taps - 1]};
          float sums[kWeightTileRows512][3] = {};
          if (avx512) {
            weight_tile_avx512(grad, x, offsets, l.pixels, sums);
          } else {
            weight_tile(grad, x, offsets, l.pixels, sums);
          }
          for (std::int64_t j = 0; j < channels; ++j) {
            for (std::int64_t i = 0; i < taps; ++i) {
              partial_weight[(first_channel + j) * depth + k + i] += sums[j][i];
            }
          }
        }
        if (grad_bias == nullptr) continue;
        for (std::int64_t j = 0; j < channels; ++j) {
          float sum = 0.0f;
          for (std::int64_t p = 0; p < l.pixels; ++p) sum += grad[j][p];
          partial_bias[first_channel + j] += sum;
        }
      }
    }
    write_partial_sums(partial_base, partial, threads, weight_numel, grad_weight, grad_bias);
  }
#endif
}

}  // namespace sublet::ops::cpu
