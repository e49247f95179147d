#pragma once
// AVX-512 versions of the register tiles of conv2d_avx2_cpu.cpp's direct convolution: the
// forward tile, and the weight gradient's (taken where conv2d_avx2_weight_gradient_applies;
// other weight gradients go through im2col and gemm_avx512_cpu.h on AVX-512 CPUs). They are
// compiled for AVX-512 through function target attributes (the build's -march stays AVX2), so
// callers must check cpu_has_avx512() first. Same contract as the AVX2 tile, with 16-float
// vectors: a forward tile covers 16 * vectors output pixels of 4 or 8 output channels.
#include <cstdint>

namespace sublet::ops::cpu {

// True when this CPU runs AVX-512F/VL/DQ/BW code (checked once), the build has the tiles, and
// TuningOptions::cpu_avx512 (core/tuning.h; a user setting) allows them.
bool cpu_has_avx512();

// Pixels per forward tile: 16 * vectors, vectors in [1, kMaxTileVectors512].
constexpr std::int64_t kMaxTileVectors512 = 3;

// Output channels per forward tile: 4 * quads, quads in [1, kMaxTileQuads512].
constexpr std::int64_t kMaxTileQuads512 = 2;

// out[j][0..count) for j < channels = bias[j / 4][j % 4] + sum over k of
// weights[j / 4][4 * k + j % 4] * x[offsets[k] + i], with count <= 16 * vectors and channels <=
// 4 * quads (out has 4 * quads entries). weights: per quad [depth][4]; bias: per quad 4 values;
// x must be readable for 16 * vectors floats past every offsets[k].
void tile_avx512(int vectors, int quads, const float* x, const std::int64_t* offsets,
                 std::int64_t depth, const float* const* weights, const float* const* bias,
                 float* const* out, std::int64_t channels, std::int64_t count);

// Rows of gradient per weight-gradient tile.
constexpr std::int64_t kWeightTileRows512 = 8;

// sums[j][i] += sum over p < count of grad[j][p] * x[offsets[i] + p], for 8 gradient rows and 3
// taps (24 accumulators). grad rows are read only below count; x must be readable for count
// rounded up to 16 floats past every offsets[i].
void weight_tile_avx512(const float* const* grad, const float* x, const std::int64_t* offsets,
                        std::int64_t count, float sums[kWeightTileRows512][3]);

}  // namespace sublet::ops::cpu
