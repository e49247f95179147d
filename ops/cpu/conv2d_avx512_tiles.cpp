#include "ops/cpu/conv2d_avx512_tiles.h"

#include <string>

#include "core/errors.h"
#include "core/tuning.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SUBLET_CONV2D_AVX512 1
// Only these functions are AVX-512 code; the rest of the build keeps its -march, so the
// binary still runs on CPUs without AVX-512 (cpu_has_avx512() decides at run time).
#define SUBLET_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
#endif

namespace sublet::ops::cpu {

bool cpu_has_avx512() {
#ifdef SUBLET_CONV2D_AVX512
  static const bool detected = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
  }();
  return detected && tuning().cpu_avx512;
#else
  return false;
#endif
}

#ifdef SUBLET_CONV2D_AVX512

namespace {

// V vectors of 16 pixels x 4Q channels (Q quads of 4, one packed weight block each): 4QV
// accumulators (24 of the 32 registers at V = 3, Q = 2), the V input vectors of a tap shared by
// every channel, each weight broadcast once per tap.
template <int V, int Q>
SUBLET_AVX512 void tile(const float* x, const std::int64_t* offsets, std::int64_t depth,
                        const float* const* weights, const float* const* bias, float* const* out,
                        std::int64_t channels, std::int64_t count) {
  __m512 acc[4 * Q][V];
  const float* w[Q];
  for (int q = 0; q < Q; ++q) {
    w[q] = weights[q];
    for (int j = 0; j < 4; ++j) {
      for (int v = 0; v < V; ++v) acc[4 * q + j][v] = _mm512_set1_ps(bias[q][j]);
    }
  }
  for (std::int64_t k = 0; k < depth; ++k) {
    const float* from = x + offsets[k];
    __m512 in[V];
    for (int v = 0; v < V; ++v) in[v] = _mm512_loadu_ps(from + 16 * v);
    for (int q = 0; q < Q; ++q) {
      for (int j = 0; j < 4; ++j) {
        const __m512 wj = _mm512_set1_ps(w[q][4 * k + j]);
        for (int v = 0; v < V; ++v) acc[4 * q + j][v] = _mm512_fmadd_ps(in[v], wj, acc[4 * q + j][v]);
      }
    }
  }
  for (std::int64_t j = 0; j < channels; ++j) {
    for (int v = 0; v < V; ++v) {
      const std::int64_t left = count - 16 * v;
      if (left >= 16) {
        _mm512_storeu_ps(out[j] + 16 * v, acc[j][v]);
      } else if (left > 0) {
        _mm512_mask_storeu_ps(out[j] + 16 * v, static_cast<__mmask16>((1u << left) - 1), acc[j][v]);
      }
    }
  }
}

}  // namespace

SUBLET_AVX512 void weight_tile_avx512(const float* const* grad, const float* x, const std::int64_t* offsets,
                                      std::int64_t count, float sums[kWeightTileRows512][3]) {
  static_assert(kWeightTileRows512 == 8);
  const float* x0 = x + offsets[0];
  const float* x1 = x + offsets[1];
  const float* x2 = x + offsets[2];
  // 24 named accumulators: with an array of them GCC stored every one to the stack on each step.
#define SUBLET_ROW_ACCUMULATORS(j) __m512 a##j##0 = _mm512_setzero_ps(), a##j##1 = a##j##0, a##j##2 = a##j##0;
  SUBLET_ROW_ACCUMULATORS(0) SUBLET_ROW_ACCUMULATORS(1) SUBLET_ROW_ACCUMULATORS(2) SUBLET_ROW_ACCUMULATORS(3)
  SUBLET_ROW_ACCUMULATORS(4) SUBLET_ROW_ACCUMULATORS(5) SUBLET_ROW_ACCUMULATORS(6) SUBLET_ROW_ACCUMULATORS(7)
#undef SUBLET_ROW_ACCUMULATORS
  // The 3 input vectors of a step are shared by the 8 rows: 11 loads per 24 FMAs.
  const __mmask16 tail = static_cast<__mmask16>((1u << (count % 16)) - 1);
  const float* g0 = grad[0];
  const float* g1 = grad[1];
  const float* g2 = grad[2];
  const float* g3 = grad[3];
  const float* g4 = grad[4];
  const float* g5 = grad[5];
  const float* g6 = grad[6];
  const float* g7 = grad[7];
  for (std::int64_t p = 0; p < count; p += 16) {
    const __mmask16 mask = p + 16 <= count ? static_cast<__mmask16>(0xFFFF) : tail;  // zeros past count
    const __m512 v0 = _mm512_loadu_ps(x0 + p), v1 = _mm512_loadu_ps(x1 + p), v2 = _mm512_loadu_ps(x2 + p);
#define SUBLET_ROW_STEP(j)                                      \
  {                                                             \
    const __m512 g = _mm512_maskz_loadu_ps(mask, g##j + p);     \
    a##j##0 = _mm512_fmadd_ps(g, v0, a##j##0);                  \
    a##j##1 = _mm512_fmadd_ps(g, v1, a##j##1);                  \
    a##j##2 = _mm512_fmadd_ps(g, v2, a##j##2);                  \
  }
    SUBLET_ROW_STEP(0) SUBLET_ROW_STEP(1) SUBLET_ROW_STEP(2) SUBLET_ROW_STEP(3)
    SUBLET_ROW_STEP(4) SUBLET_ROW_STEP(5) SUBLET_ROW_STEP(6) SUBLET_ROW_STEP(7)
#undef SUBLET_ROW_STEP
  }
#define SUBLET_ROW_SUMS(j)                         \
  sums[j][0] += _mm512_reduce_add_ps(a##j##0);     \
  sums[j][1] += _mm512_reduce_add_ps(a##j##1);     \
  sums[j][2] += _mm512_reduce_add_ps(a##j##2);
  SUBLET_ROW_SUMS(0) SUBLET_ROW_SUMS(1) SUBLET_ROW_SUMS(2) SUBLET_ROW_SUMS(3)
  SUBLET_ROW_SUMS(4) SUBLET_ROW_SUMS(5) SUBLET_ROW_SUMS(6) SUBLET_ROW_SUMS(7)
#undef SUBLET_ROW_SUMS
}

void tile_avx512(int vectors, int quads, const float* x, const std::int64_t* offsets,
                 std::int64_t depth, const float* const* weights, const float* const* bias,
                 float* const* out, std::int64_t channels, std::int64_t count) {
  switch (quads * 4 + vectors) {
    case 4 + 1: return tile<1, 1>(x, offsets, depth, weights, bias, out, channels, count);
    case 4 + 2: return tile<2, 1>(x, offsets, depth, weights, bias, out, channels, count);
    case 4 + 3: return tile<3, 1>(x, offsets, depth, weights, bias, out, channels, count);
    case 8 + 1: return tile<1, 2>(x, offsets, depth, weights, bias, out, channels, count);
    case 8 + 2: return tile<2, 2>(x, offsets, depth, weights, bias, out, channels, count);
    case 8 + 3: return tile<3, 2>(x, offsets, depth, weights, bias, out, channels, count);
    default:
      throw Error("conv2d: an AVX-512 tile of 1 to 3 vectors and 1 or 2 quads was expected, found " +
                  std::to_string(vectors) + " vectors and " + std::to_string(quads) + " quads");
  }
}

#else

void tile_avx512(int, int, const float*, const std::int64_t*, std::int64_t, const float* const*,
                 const float* const*, float* const*, std::int64_t, std::int64_t) {
  throw Error("conv2d: the AVX-512 CPU tiles are not built (needs GCC or Clang on x86-64)");
}

void weight_tile_avx512(const float* const*, const float*, const std::int64_t*, std::int64_t,
                        float[kWeightTileRows512][3]) {
  throw Error("conv2d: the AVX-512 CPU tiles are not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace sublet::ops::cpu
