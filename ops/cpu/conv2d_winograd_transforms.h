#pragma once
// What the Winograd F(2x2, 3x3) forward (conv2d_winograd_cpu.cpp) and weight gradient
// (conv2d_winograd_weight_cpu.cpp) share: the plan of a call, and the input transform. The
// transforms are AVX-512 code through function target attributes (the build's -march may stop at
// AVX2): call them only where cpu_has_avx512() is true. Internal to those two files.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/errors.h"
#include "ops/conv2d.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SUBLET_WINOGRAD_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
#endif

namespace sublet::ops::cpu::winograd {

// The 16 transformed positions of a tile, indexed b * 4 + a: b the row of B^T d B (the kernel
// row side), a its column.
constexpr std::int64_t kPositions = 16;
struct Plan {
  std::int64_t channels, out_channels, height, width;
  std::int64_t tiles_h, tiles_w, tiles_per_image;
  std::int64_t images_per_item, items;  // items: scheduling units of whole images
  std::int64_t rows_per_block;  // tile rows (numbered through an item's images) transformed at once
  std::int64_t stride;  // floats per row of V and M: a block's tiles rounded up to 16
  std::int64_t quads;   // packed weight blocks of 4 output channels per position
  // Floats between the positions of V (C rows) and of M (OC rows, or of the transformed output
  // gradient). One cache line more than the rows: the transforms write and read all 16 positions
  // of a tile at once, and 16 streams a multiple of 4 KiB apart would share one set of the L1
  // cache (at 7x7 with 64 channels they would, and thrash it).
  std::int64_t input_position_stride, output_position_stride;
  int threads;
};

// The geometry of a call, and its items of images_per_item images (fewer only if the batch is
// short of one per thread) with blocks of rows_per_block tile rows.
inline Plan make_plan(const Conv2dShape& s, std::int64_t images_per_item, std::int64_t rows_per_block) {
  Plan p{};
  p.channels = s.in_channels;
  p.out_channels = s.out_channels;
  p.height = s.in_height;
  p.width = s.in_width;
  p.tiles_h = (p.height + 1) / 2;
  p.tiles_w = (p.width + 1) / 2;
  p.tiles_per_image = p.tiles_h * p.tiles_w;
  p.threads = omp_get_max_threads();
  // Never so few items that a thread has none.
  const std::int64_t per_thread = (s.batch + p.threads - 1) / p.threads;
  p.images_per_item = std::clamp<std::int64_t>(images_per_item, 1, std::max<std::int64_t>(per_thread, 1));
  p.items = (s.batch + p.images_per_item - 1) / p.images_per_item;
  p.rows_per_block = std::clamp<std::int64_t>(rows_per_block, 1, p.images_per_item * p.tiles_h);
  p.stride = (p.rows_per_block * p.tiles_w + 15) / 16 * 16;
  p.quads = (p.out_channels + 3) / 4;
  p.input_position_stride = p.channels * p.stride + 16;
  p.output_position_stride = p.out_channels * p.stride + 16;
  return p;
}

#ifdef SUBLET_WINOGRAD_AVX512

// The first n lanes (all 16 from n = 16 on, none for n <= 0).
inline __mmask16 first_lanes(std::int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<std::int64_t>(n, 0)) - 1);
}

// Lanes i of a 16-float load at column `first` that lie inside [0, width).
inline __mmask16 inside_lanes(std::int64_t first, std::int64_t width) {
  const std::int64_t from = std::clamp<std::int64_t>(-first, 0, 16), to = std::clamp<std::int64_t>(width - first, 0, 16);
  return static_cast<__mmask16>(((1u << to) - 1) & ~((1u << from) - 1));
}

// The input rows of tile row `row` (numbered through the item's images) into L1, ahead of the
// transform: it reads a row of every channel plane in turn, more streams than the hardware
// prefetchers follow. item_rows: the item's tile rows (none past them).
SUBLET_WINOGRAD_AVX512 inline void prefetch_tile_row(const Plan& p, const float* channel_input, std::int64_t row,
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

// V[position][c][(row - first_row) * tiles_w + tile] = B^T d B for the tiles of the tile rows
// [first_row, first_row + rows) of channel c (tile rows numbered through the item's images),
// B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]; d is the 4x4 block of the
// zero-padded plane whose top left is input pixel (2 * tile row - 1, 2 * tile column - 1).
// 16 tiles of a tile row at a time, all in registers: the columns 2t - 1 .. 2t + 2 of each input
// row come from masked loads (the masks are the padding) deinterleaved into even and odd.
// item_rows: the item's tile rows; the rows of the next block are prefetched.
SUBLET_WINOGRAD_AVX512 inline void transform_input_rows(const Plan& p, const float* channel_input, std::int64_t first_row,
                                                 std::int64_t rows, std::int64_t item_rows, float* v) {
  const std::int64_t position_stride = p.input_position_stride, in_image = p.channels * p.height * p.width;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (std::int64_t tj = 0; tj < p.tiles_w; tj += 16) {
    const __mmask16 store = first_lanes(p.tiles_w - tj);
    const std::int64_t left = 2 * tj - 1, right = 2 * tj + 1;  // first columns of the two load pairs
    const __mmask16 left_lo = inside_lanes(left, p.width), left_hi = inside_lanes(left + 16, p.width);
    const __mmask16 right_lo = inside_lanes(right, p.width), right_hi = inside_lanes(right + 16, p.width);
    // Tile row and plane counted along (a 64-bit division per row cost more than its loads).
    std::int64_t ti = first_row % p.tiles_h;
    const float* plane = channel_input + first_row / p.tiles_h * in_image;
    for (std::int64_t row = first_row; row < first_row + rows; ++row, ti = ti + 1 == p.tiles_h ? 0 : ti + 1,
                      plane += ti == 0 ? in_image : 0) {
      if (tj == 0) prefetch_tile_row(p, channel_input, row + rows, item_rows);  // the next block's
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

// The output transform A^T m A of one tile per lane: its 16 transformed positions m (index
// b * 4 + a) to the 2x2 outputs (y{row}{column}), each plus `bias`. Shared by the forward's
// three output layouts (conv2d_winograd_cpu.cpp, conv2d_winograd_row_pairs.h,
// conv2d_winograd_small_planes.h), so that all three give the same bits.
struct OutputTile {
  __m512 y00, y01, y10, y11;
};

SUBLET_WINOGRAD_AVX512 inline OutputTile output_transform(const __m512 (&mm)[kPositions], __m512 bias) {
  __m512 s0[4], s1[4];  // A^T m: rows
  for (int a = 0; a < 4; ++a) {
    s0[a] = _mm512_add_ps(_mm512_add_ps(mm[a], mm[4 + a]), mm[8 + a]);
    s1[a] = _mm512_sub_ps(_mm512_sub_ps(mm[4 + a], mm[8 + a]), mm[12 + a]);
  }
  return {_mm512_add_ps(bias, _mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2])),
          _mm512_add_ps(bias, _mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3])),
          _mm512_add_ps(bias, _mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2])),
          _mm512_add_ps(bias, _mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3]))};
}

// The output-gradient transform A dy A^T of one tile per lane, shared by the weight gradient's
// two layouts (conv2d_winograd_weight_cpu.cpp, conv2d_winograd_row_pairs.h). First dy A^T along
// one gradient row: its even (q0) and odd (q1) columns to the 4 transformed columns.
SUBLET_WINOGRAD_AVX512 inline void grad_output_row(__m512 q0, __m512 q1, __m512 (&row)[4]) {
  const __m512 zero = _mm512_setzero_ps();
  row[0] = q0;
  row[1] = _mm512_add_ps(q0, q1);
  row[2] = _mm512_sub_ps(q0, q1);
  row[3] = _mm512_sub_ps(zero, q1);  // 0 - q1, not a sign flip: +0 where q1 is 0, as before
}

// Then A (dy A^T) down the tile's two gradient rows e, stored as the 16 positions,
// `position_stride` floats apart, in the lanes of `store`.
SUBLET_WINOGRAD_AVX512 inline void store_grad_output_positions(float* out, std::int64_t position_stride, __mmask16 store,
                                                               const __m512 (&e)[2][4]) {
  const __m512 zero = _mm512_setzero_ps();
  for (int a = 0; a < 4; ++a) {
    _mm512_mask_storeu_ps(out + (0 + a) * position_stride, store, e[0][a]);
    _mm512_mask_storeu_ps(out + (4 + a) * position_stride, store, _mm512_add_ps(e[0][a], e[1][a]));
    _mm512_mask_storeu_ps(out + (8 + a) * position_stride, store, _mm512_sub_ps(e[0][a], e[1][a]));
    _mm512_mask_storeu_ps(out + (12 + a) * position_stride, store, _mm512_sub_ps(zero, e[1][a]));
  }
}

#else

inline void transform_input_rows(const Plan&, const float*, std::int64_t, std::int64_t, std::int64_t, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace sublet::ops::cpu::winograd
