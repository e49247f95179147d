#include "ops/cpu/conv2d_winograd_cpu.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "ops/cpu/conv2d_avx512_tiles.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// Only the transforms are AVX-512 code (as in conv2d_avx512_tiles.cpp): the rest of the build
// keeps its -march, and conv2d_winograd_applies() checks the CPU at run time.
#define SUBLET_WINOGRAD_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
#endif

namespace sublet::ops::cpu {

namespace {

std::atomic<bool> winograd_allowed{true};

bool winograd_switched_off_by_environment() {
  static const bool off = [] {
    const char* value = std::getenv("SUBLET_CPU_NO_WINOGRAD");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return off;
}

// The 16 transformed positions of a tile, indexed b * 4 + a: b the row of B^T d B (the kernel
// row side), a its column.
constexpr std::int64_t kPositions = 16;
// The register tile's widths: 16 * 3 tiles of pixels, 8 output channels (two quads of 4).
constexpr std::int64_t kTileColumns = 16 * kMaxTileVectors512;
constexpr std::int64_t kQuad = 4;
// Tiles per work item (a scheduling unit of whole images), about.
constexpr std::int64_t kTargetTilesPerItem = 192;
// Fewer channels, and the transforms cost more than the GEMMs save: ResNet-20's 16 -> 16
// channels at 28x28 ran 4.2-4.5 ms against the direct tile's 3.9 (one thread, batch 128), where
// 32 -> 32 at 14x14 ran 3.2 against 3.7 and 64 -> 64 at 7x7 3.2 against 4.9 (im2col + GEMM).
constexpr std::int64_t kMinChannels = 32;

struct Plan {
  std::int64_t channels, out_channels, height, width;
  std::int64_t tiles_h, tiles_w, tiles_per_image;
  std::int64_t images_per_item, items;
  // A block: the tile rows whose transforms, GEMMs and inverse transforms run back to back, as many
  // as fill a register tile (48 tiles; at least one row), so V and M stay in L1 (16 channels)
  // or L2: with V and M for a whole item the transforms ran at the speed of L2 stores.
  std::int64_t rows_per_block;
  std::int64_t stride;  // floats per row of V and M: a block's tiles rounded up to 16
  std::int64_t quads;   // packed weight blocks of 4 output channels per position
  // Floats between the positions of V (C rows) and of M (OC rows). One cache line more than the
  // rows: the transforms write and read all 16 positions of a tile at once, and 16 streams a
  // multiple of 4 KiB apart would share one set of the L1 cache (at 7x7 with 64 channels they
  // were, and the forward ran 1.4x slower than the direct convolution).
  std::int64_t input_position_stride, output_position_stride;
  int threads;
};

Plan make_plan(const Conv2dShape& s) {
  Plan p{};
  p.channels = s.in_channels;
  p.out_channels = s.out_channels;
  p.height = s.in_height;
  p.width = s.in_width;
  p.tiles_h = (p.height + 1) / 2;
  p.tiles_w = (p.width + 1) / 2;
  p.tiles_per_image = p.tiles_h * p.tiles_w;
  p.threads = omp_get_max_threads();
  p.images_per_item = std::max<std::int64_t>(1, kTargetTilesPerItem / p.tiles_per_image);
  // Never so few items that a thread has none.
  const std::int64_t per_thread = (s.batch + p.threads - 1) / p.threads;
  p.images_per_item = std::clamp<std::int64_t>(p.images_per_item, 1, std::max<std::int64_t>(per_thread, 1));
  p.items = (s.batch + p.images_per_item - 1) / p.images_per_item;
  p.rows_per_block = std::max<std::int64_t>(1, kTileColumns / p.tiles_w);
  p.stride = (p.rows_per_block * p.tiles_w + 15) / 16 * 16;
  p.quads = (p.out_channels + kQuad - 1) / kQuad;
  p.input_position_stride = p.channels * p.stride + 16;
  p.output_position_stride = p.out_channels * p.stride + 16;
  return p;
}

// U = G g G^T for every (output channel, input channel), packed per position as the register
// tile reads it: [position][quad][channel][4], zeros past the last output channel.
// G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]].
void transform_weights(const Plan& p, const float* weight, float* packed) {
  std::fill(packed, packed + kPositions * p.quads * p.channels * kQuad, 0.0f);
  for (std::int64_t k = 0; k < p.out_channels; ++k) {
    for (std::int64_t c = 0; c < p.channels; ++c) {
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
        for (int a = 0; a < 4; ++a) {
          packed[((b * 4 + a) * p.quads + k / kQuad) * p.channels * kQuad + c * kQuad + k % kQuad] =
              static_cast<float>(u[a]);
        }
      }
    }
  }
}

#ifdef SUBLET_WINOGRAD_AVX512

__mmask16 first_lanes(std::int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<std::int64_t>(n, 0)) - 1);
}

// Lanes i of a 16-float load at column `first` that lie inside [0, width).
__mmask16 inside_lanes(std::int64_t first, std::int64_t width) {
  const std::int64_t from = std::clamp<std::int64_t>(-first, 0, 16), to = std::clamp<std::int64_t>(width - first, 0, 16);
  return static_cast<__mmask16>(((1u << to) - 1) & ~((1u << from) - 1));
}

// V[position][c][(row - first_row) * tiles_w + tile] = B^T d B for the tiles of the tile rows
// [first_row, first_row + rows) of channel c (tile rows numbered through the item's images),
// B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]; d is the 4x4 block of the
// zero-padded plane whose top left is input pixel (2 * tile row - 1, 2 * tile column - 1).
// 16 tiles of a tile row at a time, all in registers: the columns 2t - 1 .. 2t + 2 of each input
// row come from masked loads (the masks are the padding) deinterleaved into even and odd.
// The input rows of tile row `row` (numbered through the item's images) into L1: the transform
// reads 16 channel planes at once, too many streams for the hardware prefetchers (its loads
// waited on memory for most of its time).
SUBLET_WINOGRAD_AVX512 void prefetch_tile_row(const Plan& p, const float* channel_input, std::int64_t row,
                                              std::int64_t item_rows) {
  if (row >= item_rows) return;
  const std::int64_t ti = row % p.tiles_h;
  const float* plane = channel_input + row / p.tiles_h * p.channels * p.height * p.width;
  for (std::int64_t y = std::max<std::int64_t>(2 * ti - 1, 0); y < std::min(2 * ti + 3, p.height); ++y) {
    const float* in = plane + y * p.width;
    for (std::int64_t x = 0; x < p.width; x += 16) _mm_prefetch(reinterpret_cast<const char*>(in + x), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(in + p.width - 1), _MM_HINT_T0);
  }
}

SUBLET_WINOGRAD_AVX512 void transform_input_rows(const Plan& p, const float* channel_input, std::int64_t first_row,
                                                 std::int64_t rows, std::int64_t item_rows, float* v) {
  const std::int64_t position_stride = p.input_position_stride, in_image = p.channels * p.height * p.width;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (std::int64_t tj = 0; tj < p.tiles_w; tj += 16) {
    const __mmask16 store = first_lanes(p.tiles_w - tj);
    const std::int64_t left = 2 * tj - 1, right = 2 * tj + 1;  // first columns of the two load pairs
    const __mmask16 left_lo = inside_lanes(left, p.width), left_hi = inside_lanes(left + 16, p.width);
    const __mmask16 right_lo = inside_lanes(right, p.width), right_hi = inside_lanes(right + 16, p.width);
    for (std::int64_t row = first_row; row < first_row + rows; ++row) {
      if (tj == 0) prefetch_tile_row(p, channel_input, row + rows, item_rows);  // the next block's
      const std::int64_t ti = row % p.tiles_h;
      const float* plane = channel_input + row / p.tiles_h * in_image;
      __m512 h[4][4];  // d B: per input row r, the 4 columns a of the row transform
      for (int r = 0; r < 4; ++r) {
        const std::int64_t y = 2 * ti + r - 1;
        if (y < 0 || y >= p.height) {
          for (int a = 0; a < 4; ++a) h[r][a] = _mm512_setzero_ps();
          continue;
        }
        const float* in = plane + y * p.width;
        const __m512 l0 = _mm512_maskz_loadu_ps(left_lo, in + left), l1 = _mm512_maskz_loadu_ps(left_hi, in + left + 16);
        const __m512 r0 = _mm512_maskz_loadu_ps(right_lo, in + right);
        const __m512 r1 = _mm512_maskz_loadu_ps(right_hi, in + right + 16);
        const __m512 x0 = _mm512_permutex2var_ps(l0, even, l1), x1 = _mm512_permutex2var_ps(l0, odd, l1);
        const __m512 x2 = _mm512_permutex2var_ps(r0, even, r1), x3 = _mm512_permutex2var_ps(r0, odd, r1);
        h[r][0] = _mm512_sub_ps(x0, x2);
        h[r][1] = _mm512_add_ps(x1, x2);
        h[r][2] = _mm512_sub_ps(x2, x1);
        h[r][3] = _mm512_sub_ps(x1, x3);
      }
      float* out = v + (row - first_row) * p.tiles_w + tj;
      for (int a = 0; a < 4; ++a) {  // B^T (d B): down the rows
        _mm512_mask_storeu_ps(out + (0 + a) * position_stride, store, _mm512_sub_ps(h[0][a], h[2][a]));
        _mm512_mask_storeu_ps(out + (4 + a) * position_stride, store, _mm512_add_ps(h[1][a], h[2][a]));
        _mm512_mask_storeu_ps(out + (8 + a) * position_stride, store, _mm512_sub_ps(h[2][a], h[1][a]));
        _mm512_mask_storeu_ps(out + (12 + a) * position_stride, store, _mm512_sub_ps(h[1][a], h[3][a]));
      }
    }
  }
}

// Output channel k of the tile rows [first_row, first_row + rows) from
// M[position][k][(row - first_row) * tiles_w + tile]: Y = A^T m A + bias,
// A^T = [[1, 1, 1, 0], [0, 1, -1, -1]], cropped to the plane (odd sizes).
SUBLET_WINOGRAD_AVX512 void transform_output_rows(const Plan& p, const float* m, std::int64_t first_row,
                                                  std::int64_t rows, float bias, float* channel_output) {
  const std::int64_t position_stride = p.output_position_stride, out_image = p.out_channels * p.height * p.width;
  const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const __m512 b = _mm512_set1_ps(bias);
  for (std::int64_t row = first_row; row < first_row + rows; ++row) {
    const std::int64_t ti = row % p.tiles_h;
    const float* at = m + (row - first_row) * p.tiles_w;
    float* row0 = channel_output + row / p.tiles_h * out_image + 2 * ti * p.width;
    const bool second_row = 2 * ti + 1 < p.height;
    for (std::int64_t tj = 0; tj < p.tiles_w; tj += 16) {
      const __mmask16 mask = first_lanes(p.tiles_w - tj);
      __m512 mm[kPositions];
      for (std::int64_t i = 0; i < kPositions; ++i) mm[i] = _mm512_maskz_loadu_ps(mask, at + i * position_stride + tj);
      __m512 s0[4], s1[4];  // A^T m: rows
      for (int a = 0; a < 4; ++a) {
        s0[a] = _mm512_add_ps(_mm512_add_ps(mm[a], mm[4 + a]), mm[8 + a]);
        s1[a] = _mm512_sub_ps(_mm512_sub_ps(mm[4 + a], mm[8 + a]), mm[12 + a]);
      }
      const __m512 y00 = _mm512_add_ps(b, _mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2]));
      const __m512 y01 = _mm512_add_ps(b, _mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3]));
      const __m512 y10 = _mm512_add_ps(b, _mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2]));
      const __m512 y11 = _mm512_add_ps(b, _mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3]));
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

void transform_input_rows(const Plan&, const float*, std::int64_t, std::int64_t, std::int64_t, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}
void transform_output_rows(const Plan&, const float*, std::int64_t, std::int64_t, float, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace

void set_winograd_allowed(bool allowed) { winograd_allowed.store(allowed); }

bool conv2d_winograd_applies(const Conv2dShape& s) {
  return s.kernel_h == 3 && s.kernel_w == 3 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 1 &&
         s.pad_w == 1 && s.dilation_h == 1 && s.dilation_w == 1 && s.groups == 1 &&
         s.format == MemoryFormat::Contiguous && s.in_channels >= kMinChannels && s.out_channels >= kMinChannels &&
         winograd_allowed.load(std::memory_order_relaxed) && !winograd_switched_off_by_environment() &&
         cpu_has_avx512();
}

void conv2d_forward_winograd(const Context& ctx, const Conv2dShape& s, const float* input, const float* weight,
                             const float* bias, float* output) {
  if (!conv2d_winograd_applies(s)) {
    throw Error("conv2d: the Winograd CPU kernel needs a 3x3 stride-1 padding-1 convolution of one group with "
                ">= 8 channels on an AVX-512 CPU");
  }
  const Plan p = make_plan(s);
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
  transform_weights(p, weight, packed);
  const std::int64_t in_image = p.channels * p.height * p.width;
  const std::int64_t out_plane = p.height * p.width, out_image = p.out_channels * out_plane;

#pragma omp parallel num_threads(p.threads) if (p.items > 1)
  {
    float* v = thread_base + omp_get_thread_num() * per_thread;
    float* m = v + transformed_input;
    std::vector<std::int64_t> channel_offsets(static_cast<std::size_t>(p.channels));
    for (std::int64_t c = 0; c < p.channels; ++c) channel_offsets[static_cast<std::size_t>(c)] = c * p.stride;
    // Dynamic: items write disjoint outputs, so the result does not depend on the schedule.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < p.items; ++item) {
      const std::int64_t first_image = item * p.images_per_item;
      const std::int64_t images = std::min(p.images_per_item, s.batch - first_image);
      const std::int64_t item_rows = images * p.tiles_h;
      for (std::int64_t first_row = 0; first_row < item_rows; first_row += p.rows_per_block) {
        const std::int64_t rows = std::min(p.rows_per_block, item_rows - first_row);
        const std::int64_t tiles = rows * p.tiles_w;
        for (std::int64_t c = 0; c < p.channels; ++c) {
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
          transform_output_rows(p, m + k * p.stride, first_row, rows, bias != nullptr ? bias[k] : 0.0f,
                                output + first_image * out_image + k * out_plane);
        }
      }
    }
  }
}

}  // namespace sublet::ops::cpu
