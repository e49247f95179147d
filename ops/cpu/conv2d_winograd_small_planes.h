#pragma once
// The Winograd forward's input and output transforms (conv2d_winograd_cpu.cpp) for planes of at
// most 8x8 pixels, ResNet's last stage (7x7): there the row-by-row transforms of
// conv2d_winograd_transforms.h fill 4 of a vector's 16 lanes (a tile row is 4 tiles), a large
// part of the 7x7 forward's time. Here a whole plane (at most 64 floats) sits in 4 registers and
// a vector holds all its tiles (at most 4x4): the 16 values of each tile's 4x4 input block, and the
// 2x2 outputs of each tile back to the plane, are lane permutations from fixed index tables. Same
// arithmetic in the same order as the row transforms, so the same values bit for bit.
// Internal to conv2d_winograd_cpu.cpp.
#include <cstdint>

#include "ops/cpu/conv2d_winograd_transforms.h"

namespace sublet::ops::cpu::winograd {

inline bool small_planes(const Plan& p) { return p.height <= 8 && p.width <= 8; }

// Lane tables of one plane geometry. Tile lane L = k * tiles_w + t (tile row k, column t).
struct SmallPlaneTables {
  // Input: lane L of d[r][a] is plane pixel (2k + r - 1, 2t + a - 1), flat index in `input_index`
  // (the low 5 bits pick from a pair of registers, bit 5 which pair), zero where `input_valid` is off
  // (padding, or no tile).
  alignas(64) std::int32_t input_index[4][4][16];
  std::uint16_t input_high[4][4], input_valid[4][4];
  // Output: lane i of output vector q is plane pixel 16q + i: tile lane + 16 * (its column's
  // parity) into the pair (y00, y01) or, on odd rows (`output_odd`), (y10, y11).
  alignas(64) std::int32_t output_index[4][16];
  std::uint16_t output_odd[4];

  explicit SmallPlaneTables(const Plan& p) {
    for (int r = 0; r < 4; ++r) {
      for (int a = 0; a < 4; ++a) {
        input_high[r][a] = input_valid[r][a] = 0;
        for (int lane = 0; lane < 16; ++lane) {
          const std::int64_t k = lane / p.tiles_w, t = lane % p.tiles_w;
          const std::int64_t y = 2 * k + r - 1, x = 2 * t + a - 1;
          const bool valid = lane < p.tiles_per_image && y >= 0 && y < p.height && x >= 0 && x < p.width;
          const std::int64_t flat = valid ? y * p.width + x : 0;
          input_index[r][a][lane] = static_cast<std::int32_t>(flat);
          if (valid) input_valid[r][a] |= static_cast<std::uint16_t>(1u << lane);
          if (flat >= 32) input_high[r][a] |= static_cast<std::uint16_t>(1u << lane);
        }
      }
    }
    for (int q = 0; q < 4; ++q) {
      output_odd[q] = 0;
      for (int lane = 0; lane < 16; ++lane) {
        const std::int64_t flat = 16 * q + lane;
        const std::int64_t y = flat / p.width, x = flat % p.width;
        output_index[q][lane] = flat < p.height * p.width
                                    ? static_cast<std::int32_t>((y / 2) * p.tiles_w + x / 2 + 16 * (x % 2))
                                    : 0;
        if (flat < p.height * p.width && y % 2 == 1) output_odd[q] |= static_cast<std::uint16_t>(1u << lane);
      }
    }
  }
};

#ifdef SUBLET_WINOGRAD_AVX512

// V[position][c][i * tiles_per_image + tile] = B^T d B (as transform_input_rows) for the images
// [0, images) from channel_input (image i's plane at i * in_image); the next `prefetch_images`
// planes after them are prefetched into L1.
SUBLET_WINOGRAD_AVX512 inline void transform_input_small_planes(const Plan& p, const SmallPlaneTables& t,
                                                                const float* channel_input, std::int64_t images,
                                                                std::int64_t prefetch_images, float* v) {
  const std::int64_t plane_size = p.height * p.width, in_image = p.channels * plane_size;
  const std::int64_t position_stride = p.input_position_stride;
  const __mmask16 store = first_lanes(p.tiles_per_image);
  for (std::int64_t i = 0; i < images; ++i) {
    const float* plane = channel_input + i * in_image;
    if (i < prefetch_images) {
      const float* next = plane + images * in_image;
      for (std::int64_t x = 0; x < plane_size; x += 16) _mm_prefetch(reinterpret_cast<const char*>(next + x), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next + plane_size - 1), _MM_HINT_T0);
    }
    __m512 in[4];
    for (int q = 0; q < 4; ++q) in[q] = _mm512_maskz_loadu_ps(first_lanes(plane_size - 16 * q), plane + 16 * q);
    __m512 h[4][4];  // d B: per input row r of the blocks, the 4 columns a of the row transform
    for (int r = 0; r < 4; ++r) {
      __m512 d[4];
      for (int a = 0; a < 4; ++a) {
        const __m512i index = _mm512_load_si512(t.input_index[r][a]);
        const __m512 low = _mm512_permutex2var_ps(in[0], index, in[1]);
        const __m512 high = _mm512_permutex2var_ps(in[2], index, in[3]);
        d[a] = _mm512_maskz_mov_ps(t.input_valid[r][a], _mm512_mask_blend_ps(t.input_high[r][a], low, high));
      }
      h[r][0] = _mm512_sub_ps(d[0], d[2]);
      h[r][1] = _mm512_add_ps(d[1], d[2]);
      h[r][2] = _mm512_sub_ps(d[2], d[1]);
      h[r][3] = _mm512_sub_ps(d[1], d[3]);
    }
    float* out = v + i * p.tiles_per_image;
    for (int a = 0; a < 4; ++a) {  // B^T (d B): down the rows
      _mm512_mask_storeu_ps(out + (0 + a) * position_stride, store, _mm512_sub_ps(h[0][a], h[2][a]));
      _mm512_mask_storeu_ps(out + (4 + a) * position_stride, store, _mm512_add_ps(h[1][a], h[2][a]));
      _mm512_mask_storeu_ps(out + (8 + a) * position_stride, store, _mm512_sub_ps(h[2][a], h[1][a]));
      _mm512_mask_storeu_ps(out + (12 + a) * position_stride, store, _mm512_sub_ps(h[1][a], h[3][a]));
    }
  }
}

// Output channel k of the images [0, images) from M[position][k][i * tiles_per_image + tile]:
// Y = A^T m A + bias (as transform_output_rows), image i's plane at channel_output + i * out_image.
SUBLET_WINOGRAD_AVX512 inline void transform_output_small_planes(const Plan& p, const SmallPlaneTables& t,
                                                                 const float* m, std::int64_t images, float bias,
                                                                 float* channel_output) {
  const std::int64_t plane_size = p.height * p.width, out_image = p.out_channels * plane_size;
  const std::int64_t position_stride = p.output_position_stride;
  const __mmask16 tiles = first_lanes(p.tiles_per_image);
  const __m512 b = _mm512_set1_ps(bias);
  for (std::int64_t i = 0; i < images; ++i) {
    const float* at = m + i * p.tiles_per_image;
    __m512 mm[kPositions];
    for (std::int64_t j = 0; j < kPositions; ++j) mm[j] = _mm512_maskz_loadu_ps(tiles, at + j * position_stride);
    const auto [y00, y01, y10, y11] = output_transform(mm, b);
    float* plane = channel_output + i * out_image;
    for (int q = 0; q < 4 && 16 * q < plane_size; ++q) {
      const __m512i index = _mm512_load_si512(t.output_index[q]);
      const __m512 even = _mm512_permutex2var_ps(y00, index, y01), odd = _mm512_permutex2var_ps(y10, index, y11);
      _mm512_mask_storeu_ps(plane + 16 * q, first_lanes(plane_size - 16 * q),
                            _mm512_mask_blend_ps(t.output_odd[q], even, odd));
    }
  }
}

#else

inline void transform_input_small_planes(const Plan&, const SmallPlaneTables&, const float*, std::int64_t,
                                         std::int64_t, float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}
inline void transform_output_small_planes(const Plan&, const SmallPlaneTables&, const float*, std::int64_t, float,
                                          float*) {
  throw Error("conv2d: the Winograd CPU kernel is not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace sublet::ops::cpu::winograd
