#include "ops/cpu/conv2d_stride2_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "ops/cpu/conv2d_avx512_tiles.h"
#include "ops/cpu/conv2d_partial_sums.h"

namespace sublet::ops::cpu {

namespace {

constexpr std::int64_t kQuad = 4;
constexpr std::int64_t kTilePixels = 16 * kMaxTileVectors512;

// Output pixels of a grid, about: at 7x7 (49 pixels, a tile of 48 and one of 1) one image
// left the register tile a quarter idle, so small planes are stacked.
constexpr std::int64_t kTargetGridPixels = 192;
constexpr std::int64_t kTargetWeightGradientPixels = 768;

// The output grid and the planes laid out on it: `images` output planes (OH x OW) stacked with
// a zero row between two (the row a tap reads before the first row of the next image, or after
// the last row of the previous one), zeros before the grid (a tap reads up to one row and one
// column before its pixel) and after it (one row and one column after, and the register tile's
// reads to whole tiles). Outputs on the rows between images are computed and dropped.
struct Grid {
  std::int64_t height, width, images, image_rows, pixels, before, stride;
  std::int64_t image_at(std::int64_t b) const { return b * (height + 1) * width; }  // first pixel of image b
};

// A grid of about `target` pixels, of at most batch / (2 * threads) images (at least one). With
// `even_split`, the image count is cut so that the items come out a multiple of the threads
// (for a static schedule: 9 items would run 5 on one thread and 4 on the other).
Grid make_grid(const Conv2dShape& s, std::int64_t target, bool even_split) {
  Grid g{};
  g.height = s.out_height();
  g.width = s.out_width();
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t wanted = (target + (g.height + 1) * g.width - 1) / ((g.height + 1) * g.width);
  g.images = std::clamp<std::int64_t>(wanted, 1, std::max<std::int64_t>(1, s.batch / (2 * threads)));
  if (even_split) {
    const std::int64_t items_per_thread = (s.batch + threads * g.images - 1) / (threads * g.images);
    g.images = (s.batch + threads * items_per_thread - 1) / (threads * items_per_thread);
  }
  g.image_rows = g.images * (g.height + 1) - 1;
  g.pixels = g.image_rows * g.width;
  g.before = g.width + 1;
  const std::int64_t tiled = (g.pixels + kTilePixels - 1) / kTilePixels * kTilePixels;
  g.stride = (g.before + tiled + g.width + 1 + 15) / 16 * 16;
  return g;
}

// Zeroes a plane's margins (its grid is written by the caller).
void zero_margins(const Grid& g, float* plane) {
  std::fill(plane, plane + g.before, 0.0f);
  std::fill(plane + g.before + g.pixels, plane + g.stride, 0.0f);
}

// A copy of a plane with grid column `column` zeroed: a tap shifted by one column reads, at the
// grid's edge, the neighbouring row's value there, which must be padding.
void copy_zeroing_column(const Grid& g, const float* from, std::int64_t column, float* to) {
  std::memcpy(to, from, sizeof(float) * g.stride);
  for (std::int64_t i = 0; i < g.image_rows; ++i) to[g.before + i * g.width + column] = 0.0f;
}

// out[c][pixel] for c < channels over the whole grid: sum over k < depth of
// weights[c][k] * x[offsets[k] + pixel] + bias[c]; weights packed [quad][depth][4], bias [quad][4].
void run_grid(const Grid& g, const float* x, const std::int64_t* offsets, std::int64_t depth, const float* packed,
              const float* bias, std::int64_t channels, float* out, std::int64_t out_stride) {
  const std::int64_t quads = (channels + kQuad - 1) / kQuad;
  for (std::int64_t p = 0; p < g.pixels; p += kTilePixels) {
    const std::int64_t count = std::min(kTilePixels, g.pixels - p);
    for (std::int64_t q = 0; q < quads; q += kMaxTileQuads512) {
      const std::int64_t n = std::min(kMaxTileQuads512, quads - q);
      const std::int64_t tile_channels = std::min(n * kQuad, channels - q * kQuad);
      const float* w[kMaxTileQuads512];
      const float* b[kMaxTileQuads512];
      float* rows[kMaxTileQuads512 * kQuad];
      for (std::int64_t j = 0; j < n; ++j) {
        w[j] = packed + (q + j) * depth * kQuad;
        b[j] = bias + (q + j) * kQuad;
      }
      for (std::int64_t j = 0; j < n * kQuad; ++j) {
        rows[j] = out + (q * kQuad + std::min(j, tile_channels - 1)) * out_stride + p;
      }
      tile_avx512(static_cast<int>((count + 15) / 16), static_cast<int>(n), x + p, offsets, depth, w, b, rows,
                  tile_channels, count);
    }
  }
}

// packed[quad][k][4] = weight_of(channel, k) for channel = 4 * quad + lane < channels, else 0.
template <typename WeightOf>
void pack_weights(std::int64_t channels, std::int64_t depth, WeightOf&& weight_of, float* packed) {
  const std::int64_t quads = (channels + kQuad - 1) / kQuad;
  for (std::int64_t q = 0; q < quads; ++q) {
    for (std::int64_t k = 0; k < depth; ++k) {
      for (std::int64_t j = 0; j < kQuad; ++j) {
        const std::int64_t channel = q * kQuad + j;
        packed[(q * depth + k) * kQuad + j] = channel < channels ? weight_of(channel, k) : 0.0f;
      }
    }
  }
}

std::int64_t packed_size(std::int64_t channels, std::int64_t depth) {
  return (channels + kQuad - 1) / kQuad * depth * kQuad;
}

// Forward: per input channel 6 planes, the phases (p, q) at 2p + q and, at 4 + p, phase (p, 1)
// with its last grid column zeroed (for the taps of kernel column 0, which read one column before).
constexpr std::int64_t kForwardPlanes = 6;

// images: the item's first image; count of them (fewer than g.images for a short last item:
// the rest of the grid is zeros).
void fill_phases(const Conv2dShape& s, const Grid& g, const float* images, std::int64_t count, float* planes) {
  const std::int64_t in_image = s.in_channels * s.in_height * s.in_width;
  for (std::int64_t c = 0; c < s.in_channels; ++c) {
    float* base = planes + c * kForwardPlanes * g.stride;
    for (std::int64_t phase = 0; phase < 4; ++phase) zero_margins(g, base + phase * g.stride);
    // Pairs of columns, then an odd last column: the pair loop vectorises (even/odd
    // permutes), a load per strided element would not (and this fill is a large part of the
    // forward).
    const std::int64_t pairs = s.in_width / 2;
    const bool odd_width = s.in_width % 2 != 0;
    for (std::int64_t p = 0; p < 2; ++p) {
      float* even_plane = base + 2 * p * g.stride + g.before;
      float* odd_plane = even_plane + g.stride;
      for (std::int64_t b = 0; b < g.images; ++b) {
        const float* channel = images + b * in_image + c * s.in_height * s.in_width;
        for (std::int64_t i = 0; i <= g.height; ++i) {
          float* even = even_plane + g.image_at(b) + i * g.width;
          float* odd = odd_plane + g.image_at(b) + i * g.width;
          const std::int64_t y = 2 * i + p;
          // The zero row between two images (none after the last), rows past the input, images
          // past the batch.
          if (i == g.height || y >= s.in_height || b >= count) {
            if (i < g.height || b + 1 < g.images) {
              std::fill(even, even + g.width, 0.0f);
              std::fill(odd, odd + g.width, 0.0f);
            }
            continue;
          }
          const float* from = channel + y * s.in_width;
          for (std::int64_t j = 0; j < pairs; ++j) {
            even[j] = from[2 * j];
            odd[j] = from[2 * j + 1];
          }
          std::int64_t j = pairs;
          if (odd_width) even[j++] = from[2 * pairs];
          std::fill(even + j, even + g.width, 0.0f);
          std::fill(odd + pairs, odd + g.width, 0.0f);
        }
      }
    }
    copy_zeroing_column(g, base + 1 * g.stride, g.width - 1, base + 4 * g.stride);
    copy_zeroing_column(g, base + 3 * g.stride, g.width - 1, base + 5 * g.stride);
  }
}

// Input gradient: per output channel 2 planes, grad_output on the grid and a copy with grid
// column 0 zeroed (for the taps of kernel column 0, which read one column after).
constexpr std::int64_t kGradPlanes = 2;

void fill_grad_planes(const Grid& g, std::int64_t channels, const float* images, std::int64_t count,
                      float* planes) {
  const std::int64_t out_plane = g.height * g.width;
  for (std::int64_t k = 0; k < channels; ++k) {
    float* plane = planes + k * kGradPlanes * g.stride;
    zero_margins(g, plane);
    for (std::int64_t b = 0; b < g.images; ++b) {
      float* grid = plane + g.before + g.image_at(b);
      if (b < count) {
        std::memcpy(grid, images + (b * channels + k) * out_plane, sizeof(float) * out_plane);
      } else {
        std::fill(grid, grid + out_plane, 0.0f);
      }
      if (b + 1 < g.images) std::fill(grid + out_plane, grid + out_plane + g.width, 0.0f);
    }
    copy_zeroing_column(g, plane, 0, plane + g.stride);
  }
}

// The kernel rows (or columns) that reach phase p of the input gradient, and the output row
// shift of each: an even input row 2i is reached by kernel row 1 from output row i; an odd one
// 2i + 1 by kernel row 0 from output row i + 1 and by kernel row 2 from output row i.
struct PhaseTaps {
  std::int64_t count, kernel[2], shift[2];
};
PhaseTaps phase_taps(std::int64_t p) { return p == 0 ? PhaseTaps{1, {1, 0}, {0, 0}} : PhaseTaps{2, {0, 2}, {1, 0}}; }

// Where tap (c, kh, kw), in the weight's order, reads fill_phases' planes: kernel row 1 reads
// the even rows at the pixel's row, rows 0 and 2 the odd rows one row before and at it; likewise
// the columns.
std::vector<std::int64_t> forward_offsets(const Grid& g, std::int64_t channels) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(channels * 9));
  for (std::int64_t c = 0; c < channels; ++c) {
    for (std::int64_t kh = 0; kh < 3; ++kh) {
      for (std::int64_t kw = 0; kw < 3; ++kw) {
        const std::int64_t p = kh == 1 ? 0 : 1, q = kw == 1 ? 0 : 1;
        const std::int64_t plane = kw == 0 ? 4 + p : 2 * p + q;
        offsets[static_cast<std::size_t>(c * 9 + kh * 3 + kw)] = (c * kForwardPlanes + plane) * g.stride + g.before -
                                                                  (kh == 0 ? g.width : 0) - (kw == 0 ? 1 : 0);
      }
    }
  }
  return offsets;
}

}  // namespace

bool conv2d_stride2_applies(const Conv2dShape& s) {
  return s.kernel_h == 3 && s.kernel_w == 3 && s.stride_h == 2 && s.stride_w == 2 && s.pad_h == 1 && s.pad_w == 1 &&
         s.dilation_h == 1 && s.dilation_w == 1 && s.groups == 1 && s.format == MemoryFormat::Contiguous &&
         s.in_channels >= 8 && s.out_channels >= 8 && cpu_has_avx512();
}

namespace {

// The entry points' precondition (the dispatcher asks conv2d_stride2_applies first).
void require_stride2(const Conv2dShape& s) {
  if (!conv2d_stride2_applies(s)) {
    throw Error("conv2d: the stride-2 CPU kernel needs a 3x3 stride-2 padding-1 convolution of one group with "
                ">= 8 channels on an AVX-512 CPU");
  }
}

}  // namespace

void conv2d_forward_stride2(const Context& ctx, const Conv2dShape& s, const float* input, const float* weight,
                            const float* bias, float* output) {
  require_stride2(s);
  const Grid g = make_grid(s, kTargetGridPixels, false);
  const std::int64_t channels = s.in_channels, out_channels = s.out_channels, depth = channels * 9;
  const std::vector<std::int64_t> offsets = forward_offsets(g, channels);
  const int threads = omp_get_max_threads();
  const std::int64_t packed_weights = packed_size(out_channels, depth), packed_bias = packed_size(out_channels, 1);
  const std::int64_t staging = g.images > 1 ? out_channels * g.pixels : 0;  // stacked: outputs, then copied
  const std::int64_t per_thread = channels * kForwardPlanes * g.stride + staging;
  memory::ScopedBlock workspace = ctx.workspace(
      sizeof(float) * static_cast<std::size_t>(packed_weights + packed_bias + per_thread * threads));
  float* packed = static_cast<float*>(workspace.get());
  float* packed_b = packed + packed_weights;
  pack_weights(out_channels, depth, [&](std::int64_t k, std::int64_t tap) { return weight[k * depth + tap]; }, packed);
  pack_weights(out_channels, 1, [&](std::int64_t k, std::int64_t) { return bias != nullptr ? bias[k] : 0.0f; },
               packed_b);
  const std::int64_t in_image = channels * s.in_height * s.in_width, out_plane = g.height * g.width;
  const std::int64_t out_image = out_channels * out_plane, items = (s.batch + g.images - 1) / g.images;

#pragma omp parallel num_threads(threads) if (items > 1)
  {
    float* planes = packed_b + packed_bias + omp_get_thread_num() * per_thread;
    float* outputs = planes + channels * kForwardPlanes * g.stride;
    // Dynamic: items write disjoint outputs, so the result does not depend on the schedule.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t first = item * g.images, count = std::min(g.images, s.batch - first);
      fill_phases(s, g, input + first * in_image, count, planes);
      if (g.images == 1) {
        run_grid(g, planes, offsets.data(), depth, packed, packed_b, out_channels, output + first * out_image, g.pixels);
        continue;
      }
      run_grid(g, planes, offsets.data(), depth, packed, packed_b, out_channels, outputs, g.pixels);
      for (std::int64_t b = 0; b < count; ++b) {
        for (std::int64_t k = 0; k < out_channels; ++k) {
          std::memcpy(output + (first + b) * out_image + k * out_plane, outputs + k * g.pixels + g.image_at(b),
                      sizeof(float) * out_plane);
        }
      }
    }
  }
}

void conv2d_backward_input_stride2(const Context& ctx, const Conv2dShape& s, const float* grad_output,
                                   const float* weight, float* grad_input) {
  require_stride2(s);
  const Grid g = make_grid(s, kTargetGridPixels, false);
  const std::int64_t channels = s.in_channels, out_channels = s.out_channels;
  // Per phase (p, q) = 2p + q: its taps (k, kernel row, kernel column), k outer, with offsets
  // into the grad planes and packed weights [input channel quad][tap][4].
  std::int64_t depth[4], packed_at[4];
  std::vector<std::int64_t> offsets[4];
  std::int64_t packed_total = 0;
  for (std::int64_t phase = 0; phase < 4; ++phase) {
    const PhaseTaps rows = phase_taps(phase / 2), columns = phase_taps(phase % 2);
    depth[phase] = out_channels * rows.count * columns.count;
    packed_at[phase] = packed_total;
    packed_total += packed_size(channels, depth[phase]);
    for (std::int64_t k = 0; k < out_channels; ++k) {
      for (std::int64_t r = 0; r < rows.count; ++r) {
        for (std::int64_t t = 0; t < columns.count; ++t) {
          const bool next_column = columns.shift[t] == 1;  // reads one column after: the zeroed copy
          offsets[phase].push_back((k * kGradPlanes + (next_column ? 1 : 0)) * g.stride + g.before +
                                   rows.shift[r] * g.width + columns.shift[t]);
        }
      }
    }
  }
  const int threads = omp_get_max_threads();
  const std::int64_t zero_bias = packed_size(channels, 1);
  const std::int64_t grad_planes = out_channels * kGradPlanes * g.stride, staging = 4 * channels * g.pixels;
  const std::int64_t per_thread = grad_planes + staging;
  memory::ScopedBlock workspace = ctx.workspace(
      sizeof(float) * static_cast<std::size_t>(packed_total + zero_bias + per_thread * threads));
  float* packed = static_cast<float*>(workspace.get());
  float* zeros = packed + packed_total;
  std::fill(zeros, zeros + zero_bias, 0.0f);
  for (std::int64_t phase = 0; phase < 4; ++phase) {
    const PhaseTaps rows = phase_taps(phase / 2), columns = phase_taps(phase % 2);
    const std::int64_t taps = rows.count * columns.count;
    pack_weights(channels, depth[phase], [&](std::int64_t c, std::int64_t index) {
      const std::int64_t k = index / taps, r = index % taps / columns.count, t = index % columns.count;
      return weight[((k * channels + c) * 3 + rows.kernel[r]) * 3 + columns.kernel[t]];
    }, packed + packed_at[phase]);
  }
  const std::int64_t in_plane = s.in_height * s.in_width, out_image = out_channels * g.height * g.width;
  const std::int64_t items = (s.batch + g.images - 1) / g.images;

#pragma omp parallel num_threads(threads) if (items > 1)
  {
    float* planes = zeros + zero_bias + omp_get_thread_num() * per_thread;
    float* phases = planes + grad_planes;  // [phase][input channel][grid pixel]
    // Dynamic: items write disjoint outputs, so the result does not depend on the schedule.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t first = item * g.images, count = std::min(g.images, s.batch - first);
      fill_grad_planes(g, out_channels, grad_output + first * out_image, count, planes);
      for (std::int64_t phase = 0; phase < 4; ++phase) {
        run_grid(g, planes, offsets[phase].data(), depth[phase], packed + packed_at[phase], zeros, channels,
                 phases + phase * channels * g.pixels, g.pixels);
      }
      // Interleave the phases: input row y = 2i + p, column x = 2j + q.
      for (std::int64_t b = 0; b < count; ++b) {
      for (std::int64_t c = 0; c < channels; ++c) {
        float* plane = grad_input + ((first + b) * channels + c) * in_plane;
        for (std::int64_t y = 0; y < s.in_height; ++y) {
          const float* even =
              phases + ((y % 2) * 2 * channels + c) * g.pixels + g.image_at(b) + y / 2 * g.width;
          const float* odd = even + channels * g.pixels;
          float* row = plane + y * s.in_width;
          // Pairs, then an odd last column: the pair loop vectorises (unpacks), a branch per column does not.
          const std::int64_t pairs = s.in_width / 2;
          for (std::int64_t j = 0; j < pairs; ++j) {
            row[2 * j] = even[j];
            row[2 * j + 1] = odd[j];
          }
          if (s.in_width % 2 != 0) row[2 * pairs] = even[pairs];
        }
      }
      }
    }
  }
}

void conv2d_backward_weight_stride2(const Context& ctx, const Conv2dShape& s, const float* grad_output,
                                    const float* input, float* grad_weight, float* grad_bias) {
  require_stride2(s);
  // Long grids: the weight-gradient tile sums its 24 dot products horizontally once per call.
  const Grid g = make_grid(s, kTargetWeightGradientPixels, true);
  const std::int64_t channels = s.in_channels, out_channels = s.out_channels, depth = channels * 9;
  const std::vector<std::int64_t> offsets = forward_offsets(g, channels);
  const int threads = omp_get_max_threads();
  const std::int64_t weight_numel = out_channels * depth, partial = weight_numel + out_channels;
  const std::int64_t per_thread = channels * kForwardPlanes * g.stride + out_channels * g.pixels;
  memory::ScopedBlock workspace =
      ctx.workspace(sizeof(float) * static_cast<std::size_t>((partial + per_thread) * threads));
  float* partial_base = static_cast<float*>(workspace.get());
  std::fill(partial_base, partial_base + partial * threads, 0.0f);
  const std::int64_t in_image = channels * s.in_height * s.in_width, out_plane = g.height * g.width;
  const std::int64_t out_image = out_channels * out_plane, items = (s.batch + g.images - 1) / g.images;

#pragma omp parallel num_threads(threads) if (items > 1)
  {
    const int thread = omp_get_thread_num();
    float* planes = partial_base + partial * threads + thread * per_thread;
    float* grads = planes + channels * kForwardPlanes * g.stride;  // [k][grid pixel], zeros between images
    float* sums_of = partial_base + thread * partial;
    // Static: which items a thread sums must not vary between runs, or the float rounding of
    // the weight gradient would.
#pragma omp for schedule(static)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t first = item * g.images, count = std::min(g.images, s.batch - first);
      fill_phases(s, g, input + first * in_image, count, planes);
      for (std::int64_t k = 0; k < out_channels; ++k) {
        float* grid = grads + k * g.pixels;
        std::fill(grid, grid + g.pixels, 0.0f);
        for (std::int64_t b = 0; b < count; ++b) {
          std::memcpy(grid + g.image_at(b), grad_output + (first + b) * out_image + k * out_plane,
                      sizeof(float) * out_plane);
        }
      }
      for (std::int64_t k = 0; k < out_channels; k += kWeightTileRows512) {
        const std::int64_t rows = std::min(kWeightTileRows512, out_channels - k);
        const float* grad[kWeightTileRows512];  // a short last tile repeats its last row
        for (std::int64_t j = 0; j < kWeightTileRows512; ++j) grad[j] = grads + (k + std::min(j, rows - 1)) * g.pixels;
        for (std::int64_t tap = 0; tap < depth; tap += 3) {  // the 3 kernel columns of (c, kh)
          float sums[kWeightTileRows512][3] = {};
          weight_tile_avx512(grad, planes, offsets.data() + tap, g.pixels, sums);
          for (std::int64_t j = 0; j < rows; ++j) {
            for (std::int64_t i = 0; i < 3; ++i) sums_of[(k + j) * depth + tap + i] += sums[j][i];
          }
        }
        if (grad_bias == nullptr) continue;
        for (std::int64_t j = 0; j < rows; ++j) {
          float lanes[16] = {};  // 16 independent sums: one float chain would be latency-bound
          std::int64_t p = 0;
          for (; p + 16 <= g.pixels; p += 16) {
            for (int l = 0; l < 16; ++l) lanes[l] += grad[j][p + l];
          }
          for (; p < g.pixels; ++p) lanes[p % 16] += grad[j][p];
          float sum = 0.0f;
          for (const float lane : lanes) sum += lane;
          sums_of[weight_numel + k + j] += sum;
        }
      }
    }
    write_partial_sums(partial_base, partial, threads, weight_numel, grad_weight, grad_bias);
  }
}

}  // namespace sublet::ops::cpu
