#include "ops/cpu/conv2d_winograd_cpu.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/errors.h"
#include "ops/cpu/conv2d_avx512_tiles.h"
#include "ops/cpu/conv2d_winograd_row_pairs.h"
#include "ops/cpu/conv2d_winograd_small_planes.h"
#include "ops/cpu/conv2d_winograd_transforms.h"


namespace sublet::ops::cpu {

namespace {

std::atomic<bool> winograd_allowed{true};


using namespace winograd;

// The register tile's widths: 16 * 3 tiles of pixels, 8 output channels (two quads of 4).
constexpr std::int64_t kTileColumns = 16 * kMaxTileVectors512;
constexpr std::int64_t kQuad = 4;
// Fewer channels, and the transforms cost more than the GEMMs save (the direct tile wins there).
constexpr std::int64_t kMinChannels = 32;
// The weight gradient sums over tiles on a tile that sums its 24 dot products horizontally
// once per call, below the forward's GEMM rate: it pays from 16 channels on, but not on planes
// so small that the 2x2 tiles overhang them (7x7 is covered as 8x8), where im2col + GEMM wins.
constexpr std::int64_t kMinWeightGradientChannels = 16;
constexpr std::int64_t kMinWeightGradientPixels = 100;

// Tiles per work item (a scheduling unit of whole images), about.
constexpr std::int64_t kTargetTilesPerItem = 192;

// Blocks of as many tile rows as fill a register tile (48 tiles; at least one row): the
// transforms, GEMMs and inverse transforms of a block run back to back, so V and M stay in L1
// (16 channels) or L2; with V and M for a whole item the transforms would wait on L2 stores.
// Items come out a multiple of the thread count where they can, so that no thread idles through
// the last item of a call. Where a block holds whole images, an item is at most one block: many
// small items keep the dynamic schedule's wait at the end of each call short.
Plan forward_plan(const Conv2dShape& s) {
  const std::int64_t tiles_h = (s.in_height + 1) / 2, tiles_w = (s.in_width + 1) / 2;
  const std::int64_t tiles_per_image = tiles_h * tiles_w;
  const std::int64_t threads = omp_get_max_threads();
  std::int64_t rows_per_block = std::max<std::int64_t>(1, kTileColumns / tiles_w);
  // Planes of at most 8x8 are transformed a whole plane at a time (conv2d_winograd_small_planes.h):
  // blocks of whole images.
  if (s.in_height <= 8 && s.in_width <= 8) rows_per_block = std::max(tiles_h, rows_per_block / tiles_h * tiles_h);
  const std::int64_t images_per_block = rows_per_block / tiles_h;
  std::int64_t target = std::max<std::int64_t>(1, kTargetTilesPerItem / tiles_per_image);
  if (images_per_block >= 1) target = std::min(target, images_per_block);
  const std::int64_t items_per_thread = std::max<std::int64_t>(1, (s.batch + threads * target - 1) / (threads * target));
  const std::int64_t images = (s.batch + threads * items_per_thread - 1) / (threads * items_per_thread);
  return make_plan(s, images, rows_per_block);
}

// U = G g G^T for the output channels of one quad and every input channel, packed per position as
// the register tile reads it: [position][quad][channel][4], zeros past the last output channel.
// G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]. One quad at a time, so that the
// threads of the forward's region split the transform: done serially, it would leave the other
// threads idle for a noticeable part of each call.
void transform_weight_quad(const Plan& p, const float* weight, std::int64_t quad, float* packed) {
  for (std::int64_t c = 0; c < p.channels; ++c) {
    for (std::int64_t j = 0; j < kQuad; ++j) {
      const std::int64_t k = quad * kQuad + j;
      float* at = packed + (quad * p.channels + c) * kQuad + j;
      const std::int64_t position_stride = p.quads * p.channels * kQuad;
      if (k >= p.out_channels) {
        for (std::int64_t position = 0; position < kPositions; ++position) at[position * position_stride] = 0.0f;
        continue;
      }
      const float* g = weight + (k * p.channels + c) * 9;
      double t[4][3];  // G g
      for (int col = 0; col < 3; ++col) {
        const double g0 = g[col], g1 = g[3 + col], g2 = g[6 + col];
        t[0][col] = g0;
        t[1][col] = 0.5 * (g0 + g1 + g2);
        t[2][col] = 0.5 * (g0 - g1 + g2);
        t[3][col] = g2;
      }
      for (int b = 0; b < 4; ++b) {
        const double u[4] = {t[b][0], 0.5 * (t[b][0] + t[b][1] + t[b][2]), 0.5 * (t[b][0] - t[b][1] + t[b][2]),
                             t[b][2]};
        for (int a = 0; a < 4; ++a) at[(b * 4 + a) * position_stride] = static_cast<float>(u[a]);
      }
    }
  }
}

#ifdef SUBLET_WINOGRAD_AVX512

// Output channel k of the tile rows [first_row, first_row + rows) from
// M[position][k][(row - first_row) * tiles_w + tile]: Y = A^T m A + bias,
// A^T = [[1, 1, 1, 0], [0, 1, -1, -1]], cropped to the plane (odd sizes).
SUBLET_WINOGRAD_AVX512 void transform_output_rows(const Plan& p, const float* m, std::int64_t first_row,
                                                  std::int64_t rows, float bias, float* channel_output) {
  const std::int64_t position_stride = p.output_position_stride, out_image = p.out_channels * p.height * p.width;
  const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512 b = _mm512_set1_ps(bias);
  // Tile row and plane counted along (no 64-bit division per row).
  std::int64_t ti = first_row % p.tiles_h;
  float* plane = channel_output + first_row / p.tiles_h * out_image;
  for (std::int64_t row = first_row; row < first_row + rows; ++row, ti = ti + 1 == p.tiles_h ? 0 : ti + 1,
                    plane += ti == 0 ? out_image : 0) {
    const float* at = m + (row - first_row) * p.tiles_w;
    float* row0 = plane + 2 * ti * p.width;
    const bool second_row = 2 * ti + 1 < p.height;
    for (std::int64_t tj = 0; tj < p.tiles_w; tj += 16) {
      const __mmask16 mask = first_lanes(p.tiles_w - tj);
      __m512 mm[kPositions];
      for (std::int64_t i = 0; i < kPositions; ++i) mm[i] = _mm512_maskz_loadu_ps(mask, at + i * position_stride + tj);
      const auto [y00, y01, y10, y11] = output_transform(mm, b);
      const std::int64_t column = 2 * tj;
      const __mmask16 first = first_lanes(p.width - column), second = first_lanes(p.width - column - 16);
      _mm512_mask_storeu_ps(row0 + column, first, _mm512_permutex2var_ps(y00, low, y01));
      _mm512_mask_storeu_ps(row0 + column + 16, second, _mm512_permutex2var_ps(y00, high, y01));
      if (!second_row) continue;
      _mm512_mask_storeu_ps(row0 + p.width + column, first, _mm512_permutex2var_ps(y10, low, y11));
      _mm512_mask_storeu_ps(row0 + p.width + column + 16, second, _mm512_permutex2var_ps(y10, high, y11));
    }
  }
}

#else

void transform_output_rows(const Plan&, const float*, std::int64_t, std::int64_t, float, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace

void set_winograd_allowed(bool allowed) { winograd_allowed.store(allowed); }

namespace {

// The shape conditions of both kernels, bar the channel counts.
bool winograd_shape(const Conv2dShape& s) {
  return s.kernel_h == 3 && s.kernel_w == 3 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 1 &&
         s.pad_w == 1 && s.dilation_h == 1 && s.dilation_w == 1 && s.groups == 1 &&
         s.format == MemoryFormat::Contiguous && winograd_allowed.load(std::memory_order_relaxed) &&
         cpu_has_avx512();
}

}  // namespace

bool conv2d_winograd_applies(const Conv2dShape& s) {
  return s.in_channels >= kMinChannels && s.out_channels >= kMinChannels && winograd_shape(s);
}

bool conv2d_winograd_weight_gradient_applies(const Conv2dShape& s) {
  return s.in_channels >= kMinWeightGradientChannels && s.out_channels >= kMinWeightGradientChannels &&
         s.in_height * s.in_width >= kMinWeightGradientPixels && winograd_shape(s);
}

void conv2d_forward_winograd(const Context& ctx, const Conv2dShape& s, const float* input, const float* weight,
                             const float* bias, float* output) {
  if (!conv2d_winograd_applies(s)) {
    throw Error("conv2d: the Winograd CPU kernel needs a 3x3 stride-1 padding-1 convolution of one group with "
                ">= 8 channels on an AVX-512 CPU");
  }
  const Plan p = forward_plan(s);
  const std::int64_t packed_weights = kPositions * p.quads * p.channels * kQuad;
  const std::int64_t transformed_input = kPositions * p.input_position_stride;
  const std::int64_t transformed_output = kPositions * p.output_position_stride;
  const std::int64_t per_thread = transformed_input + transformed_output;
  memory::ScopedBlock workspace = ctx.workspace(
      sizeof(float) * static_cast<std::size_t>(packed_weights + kQuad + per_thread * p.threads));
  float* packed = static_cast<float*>(workspace.get());
  float* zero_bias = packed + packed_weights;  // the tile adds the bias per output pixel; here none
  std::fill(zero_bias, zero_bias + kQuad, 0.0f);
  float* thread_base = zero_bias + kQuad;
  const std::int64_t in_image = p.channels * p.height * p.width;
  const std::int64_t out_plane = p.height * p.width, out_image = p.out_channels * out_plane;
  const bool whole_planes = small_planes(p) && p.rows_per_block % p.tiles_h == 0;
  const bool pairs = !whole_planes && row_pairs(p);
  const SmallPlaneTables tables(p);

#pragma omp parallel num_threads(p.threads) if (p.items > 1)
  {
    float* v = thread_base + omp_get_thread_num() * per_thread;
    float* m = v + transformed_input;
    std::vector<std::int64_t> channel_offsets(static_cast<std::size_t>(p.channels));
    for (std::int64_t c = 0; c < p.channels; ++c) channel_offsets[static_cast<std::size_t>(c)] = c * p.stride;
    // Every thread's tiles read every quad: the implicit barrier of this loop holds them until all are packed.
#pragma omp for schedule(static)
    for (std::int64_t quad = 0; quad < p.quads; ++quad) transform_weight_quad(p, weight, quad, packed);
    // Dynamic: items write disjoint outputs, so the result does not depend on the schedule.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < p.items; ++item) {
      const std::int64_t first_image = item * p.images_per_item;
      const std::int64_t images = std::min(p.images_per_item, s.batch - first_image);
      const std::int64_t item_rows = images * p.tiles_h;
      for (std::int64_t first_row = 0; first_row < item_rows; first_row += p.rows_per_block) {
        const std::int64_t rows = std::min(p.rows_per_block, item_rows - first_row);
        const std::int64_t tiles = rows * p.tiles_w;
        // With whole planes: the block's images [block_image, block_image + block_images) of the item.
        const std::int64_t block_image = first_row / p.tiles_h, block_images = rows / p.tiles_h;
        for (std::int64_t c = 0; c < p.channels; ++c) {
          if (whole_planes) {
            transform_input_small_planes(p, tables, input + (first_image + block_image) * in_image + c * out_plane,
                                         block_images, std::min(block_images, images - block_image - block_images),
                                         v + c * p.stride);
            continue;
          }
          if (pairs) {
            transform_input_row_pairs(p, input + first_image * in_image + c * out_plane, first_row, rows, item_rows,
                                      v + c * p.stride);
            continue;
          }
          transform_input_rows(p, input + first_image * in_image + c * out_plane, first_row, rows, item_rows,
                               v + c * p.stride);
        }
      // Per position, M [OC x tiles] = U [OC x C] V [C x tiles], 48 tiles x 8 channels at a time.
      for (std::int64_t position = 0; position < kPositions; ++position) {
        const float* vp = v + position * p.input_position_stride;
        float* mp = m + position * p.output_position_stride;
        const float* up = packed + position * p.quads * p.channels * kQuad;
        for (std::int64_t t = 0; t < tiles; t += kTileColumns) {
          const std::int64_t count = std::min(kTileColumns, tiles - t);
          for (std::int64_t q = 0; q < p.quads; q += kMaxTileQuads512) {
            const std::int64_t quads = std::min(kMaxTileQuads512, p.quads - q);
            const std::int64_t channels = std::min(quads * kQuad, p.out_channels - q * kQuad);
            const float* w[kMaxTileQuads512];
            const float* b[kMaxTileQuads512];
            float* out[kMaxTileQuads512 * kQuad];
            for (std::int64_t j = 0; j < quads; ++j) {
              w[j] = up + (q + j) * p.channels * kQuad;
              b[j] = zero_bias;
            }
            for (std::int64_t j = 0; j < quads * kQuad; ++j) {
              out[j] = mp + (q * kQuad + std::min(j, channels - 1)) * p.stride + t;
            }
            tile_avx512(static_cast<int>((count + 15) / 16), static_cast<int>(quads), vp + t, channel_offsets.data(),
                        p.channels, w, b, out, channels, count);
          }
        }
      }
        for (std::int64_t k = 0; k < p.out_channels; ++k) {
          const float b = bias != nullptr ? bias[k] : 0.0f;
          if (whole_planes) {
            transform_output_small_planes(p, tables, m + k * p.stride, block_images, b,
                                          output + (first_image + block_image) * out_image + k * out_plane);
            continue;
          }
          if (pairs) {
            transform_output_row_pairs(p, m + k * p.stride, first_row, rows, b,
                                       output + first_image * out_image + k * out_plane);
            continue;
          }
          transform_output_rows(p, m + k * p.stride, first_row, rows, b, output + first_image * out_image + k * out_plane);
        }
      }
    }
  }
}

}  // namespace sublet::ops::cpu
