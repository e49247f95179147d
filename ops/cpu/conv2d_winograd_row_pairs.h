#pragma once
// The Winograd transforms of conv2d_winograd_transforms.h, conv2d_winograd_cpu.cpp and
// conv2d_winograd_weight_cpu.cpp, two tile rows per vector, for planes at most 16 pixels wide
// with at most 8 tiles a row (ResNet-20's 14x14 stage: 7 tiles a row). The row transforms fill
// one tile row's 7 of a vector's 16 lanes; here lanes k * tiles_w + t hold tile t of the pair's
// row k, each input row is one masked load (the plane is at most 16 wide), and the 4 columns a tile
// reads come from one two-register permutation per column. The same arithmetic in the same order
// on the same values as the row transforms, so the same results bit for bit. A pair may straddle
// two images (tile rows are numbered through an item's images).
// Internal to the two Winograd files.
#include <cstdint>

#include "ops/cpu/conv2d_winograd_transforms.h"

namespace sublet::ops::cpu::winograd {

inline bool row_pairs(const Plan& p) { return p.tiles_w <= 8 && p.width <= 16; }

#ifdef SUBLET_WINOGRAD_AVX512

// Lane L = k * tiles_w + t of a pair: t, whether k is 1 (`second`), and whether the lane holds a
// tile of either row (`tiles`).
struct PairLanes {
  __m512i t;
  __mmask16 second, tiles;
};

SUBLET_WINOGRAD_AVX512 inline PairLanes pair_lanes(const Plan& p) {
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i tiles_w = _mm512_set1_epi32(static_cast<int>(p.tiles_w));
  PairLanes l;
  l.second = _mm512_cmpge_epi32_mask(lane, tiles_w);
  l.t = _mm512_mask_sub_epi32(lane, l.second, lane, tiles_w);
  l.tiles = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(static_cast<int>(2 * p.tiles_w)));
  return l;
}

// Where a tile row is: tile row ti of the plane at `image` images from the first (tile rows are
// numbered through the images), counted along (a 64-bit division per row cost more than its loads
// in the row transforms).
struct TileRow {
  std::int64_t ti, image;
  TileRow next(const Plan& p) const { return ti + 1 == p.tiles_h ? TileRow{0, image + 1} : TileRow{ti + 1, image}; }
};

// A row of a plane (width at most 16) in one masked load; zeros above and below the plane.
SUBLET_WINOGRAD_AVX512 inline __m512 plane_row(const Plan& p, const float* plane, std::int64_t y, bool present) {
  if (!present || y < 0 || y >= p.height) return _mm512_setzero_ps();
  return _mm512_maskz_loadu_ps(first_lanes(p.width), plane + y * p.width);
}

// As transform_input_rows (same arguments and V layout).
SUBLET_WINOGRAD_AVX512 inline void transform_input_row_pairs(const Plan& p, const float* channel_input,
                                                             std::int64_t first_row, std::int64_t rows,
                                                             std::int64_t item_rows, float* v) {
  const std::int64_t position_stride = p.input_position_stride, in_image = p.channels * p.height * p.width;
  const PairLanes l = pair_lanes(p);
  // Column 2t + a - 1 of the pair's row k: index 16k + column into the two rows, zero outside the plane.
  __m512i index[4];
  __mmask16 valid[4];
  for (int a = 0; a < 4; ++a) {
    const __m512i column = _mm512_add_epi32(_mm512_add_epi32(l.t, l.t), _mm512_set1_epi32(a - 1));
    valid[a] = l.tiles & _mm512_cmpge_epi32_mask(column, _mm512_setzero_si512()) &
               _mm512_cmplt_epi32_mask(column, _mm512_set1_epi32(static_cast<int>(p.width)));
    index[a] = _mm512_mask_add_epi32(column, l.second, column, _mm512_set1_epi32(16));
  }
  TileRow at{first_row % p.tiles_h, first_row / p.tiles_h};
  for (std::int64_t row = first_row; row < first_row + rows; row += 2) {
    const bool second = row + 1 < first_row + rows;
    const TileRow pair[2] = {at, at.next(p)};
    at = pair[1].next(p);
    prefetch_tile_row(p, channel_input, row + rows, item_rows);  // the next block's
    if (second) prefetch_tile_row(p, channel_input, row + 1 + rows, item_rows);
    const float* planes[2] = {channel_input + pair[0].image * in_image, channel_input + pair[1].image * in_image};
    __m512 h[4][4];  // d B: per input row r, the 4 columns a of the row transform
    for (int r = 0; r < 4; ++r) {
      const __m512 row0 = plane_row(p, planes[0], 2 * pair[0].ti + r - 1, true);
      const __m512 row1 = plane_row(p, planes[1], 2 * pair[1].ti + r - 1, second);
      __m512 x[4];
      for (int a = 0; a < 4; ++a) x[a] = _mm512_maskz_permutex2var_ps(valid[a], row0, index[a], row1);
      h[r][0] = _mm512_sub_ps(x[0], x[2]);
      h[r][1] = _mm512_add_ps(x[1], x[2]);
      h[r][2] = _mm512_sub_ps(x[2], x[1]);
      h[r][3] = _mm512_sub_ps(x[1], x[3]);
    }
    const __mmask16 store = first_lanes((second ? 2 : 1) * p.tiles_w);
    float* out = v + (row - first_row) * p.tiles_w;
    for (int a = 0; a < 4; ++a) {  // B^T (d B): down the rows
      _mm512_mask_storeu_ps(out + (0 + a) * position_stride, store, _mm512_sub_ps(h[0][a], h[2][a]));
      _mm512_mask_storeu_ps(out + (4 + a) * position_stride, store, _mm512_add_ps(h[1][a], h[2][a]));
      _mm512_mask_storeu_ps(out + (8 + a) * position_stride, store, _mm512_sub_ps(h[2][a], h[1][a]));
      _mm512_mask_storeu_ps(out + (12 + a) * position_stride, store, _mm512_sub_ps(h[1][a], h[3][a]));
    }
  }
}

// As transform_output_rows (same arguments and M layout): Y = A^T m A + bias.
SUBLET_WINOGRAD_AVX512 inline void transform_output_row_pairs(const Plan& p, const float* m, std::int64_t first_row,
                                                              std::int64_t rows, float bias, float* channel_output) {
  const std::int64_t position_stride = p.output_position_stride, out_image = p.out_channels * p.height * p.width;
  const __m512 b = _mm512_set1_ps(bias);
  // Output column X of the pair's row k: lane k * tiles_w + X / 2 of y?0 (even X) or y?1 (odd X).
  const __m512i from = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);  // X / 2 + 16 * (X % 2)
  const __m512i index[2] = {from, _mm512_add_epi32(from, _mm512_set1_epi32(static_cast<int>(p.tiles_w)))};
  const __mmask16 row_lanes = first_lanes(p.width);
  TileRow where{first_row % p.tiles_h, first_row / p.tiles_h};
  for (std::int64_t row = first_row; row < first_row + rows; row += 2) {
    const int count = row + 1 < first_row + rows ? 2 : 1;
    const __mmask16 tiles = first_lanes(count * p.tiles_w);
    const float* at = m + (row - first_row) * p.tiles_w;
    __m512 mm[kPositions];
    for (std::int64_t i = 0; i < kPositions; ++i) mm[i] = _mm512_maskz_loadu_ps(tiles, at + i * position_stride);
    const auto [y00, y01, y10, y11] = output_transform(mm, b);
    for (int k = 0; k < count; ++k, where = where.next(p)) {
      float* row0 = channel_output + where.image * out_image + 2 * where.ti * p.width;
      _mm512_mask_storeu_ps(row0, row_lanes, _mm512_permutex2var_ps(y00, index[k], y01));
      if (2 * where.ti + 1 < p.height) {
        _mm512_mask_storeu_ps(row0 + p.width, row_lanes, _mm512_permutex2var_ps(y10, index[k], y11));
      }
    }
  }
}

// As transform_grad_output_rows of conv2d_winograd_weight_cpu.cpp (same arguments and layout):
// Mg[position][k][row * tiles_w + tile] = A dy A^T, dy the 2x2 block at (2 * tile row, 2 * tile
// column), zeros past the plane.
SUBLET_WINOGRAD_AVX512 inline void transform_grad_output_row_pairs(const Plan& p, const float* channel_grad,
                                                                   std::int64_t rows, float* mg) {
  const std::int64_t position_stride = p.output_position_stride, out_image = p.out_channels * p.height * p.width;
  const PairLanes l = pair_lanes(p);
  const __m512i even_column = _mm512_add_epi32(l.t, l.t);
  const __m512i odd_column = _mm512_add_epi32(even_column, _mm512_set1_epi32(1));
  const __m512i width = _mm512_set1_epi32(static_cast<int>(p.width)), sixteen = _mm512_set1_epi32(16);
  const __mmask16 even_valid = l.tiles & _mm512_cmplt_epi32_mask(even_column, width);
  const __mmask16 odd_valid = l.tiles & _mm512_cmplt_epi32_mask(odd_column, width);
  const __m512i even = _mm512_mask_add_epi32(even_column, l.second, even_column, sixteen);
  const __m512i odd = _mm512_mask_add_epi32(odd_column, l.second, odd_column, sixteen);
  TileRow at{0, 0};
  for (std::int64_t row = 0; row < rows; row += 2) {
    const bool second = row + 1 < rows;
    const TileRow pair[2] = {at, at.next(p)};
    at = pair[1].next(p);
    const float* planes[2] = {channel_grad + pair[0].image * out_image, channel_grad + pair[1].image * out_image};
    __m512 e[2][4];  // dy A^T: per gradient row r, the 4 columns a
    for (int r = 0; r < 2; ++r) {
      const __m512 row0 = plane_row(p, planes[0], 2 * pair[0].ti + r, true);
      const __m512 row1 = plane_row(p, planes[1], 2 * pair[1].ti + r, second);
      const __m512 q0 = _mm512_maskz_permutex2var_ps(even_valid, row0, even, row1);
      const __m512 q1 = _mm512_maskz_permutex2var_ps(odd_valid, row0, odd, row1);
      grad_output_row(q0, q1, e[r]);
    }
    const __mmask16 store = first_lanes((second ? 2 : 1) * p.tiles_w);
    float* out = mg + row * p.tiles_w;
    store_grad_output_positions(out, position_stride, store, e);  // A (dy A^T): down the rows
  }
}

#else

inline void transform_input_row_pairs(const Plan&, const float*, std::int64_t, std::int64_t, std::int64_t, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}
inline void transform_output_row_pairs(const Plan&, const float*, std::int64_t, std::int64_t, float, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}
inline void transform_grad_output_row_pairs(const Plan&, const float*, std::int64_t, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace sublet::ops::cpu::winograd
