#include "ops/cpu/conv2d_avx512_tiles.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/errors.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SUBLET_CONV2D_AVX512 1
// Only these functions are AVX-512 code; the rest of the build keeps its -march, so the
// binary still runs on CPUs without AVX-512 (cpu_has_avx512() decides at run time).
#define SUBLET_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))
#endif

namespace sublet::ops::cpu {

namespace {
std::atomic<bool> avx512_allowed{true};
}  // namespace

void set_cpu_avx512_allowed(bool allowed) { avx512_allowed.store(allowed); }

bool cpu_has_avx512() {
#ifdef SUBLET_CONV2D_AVX512
  static const bool detected = [] {
    const char* off = std::getenv("SUBLET_CPU_NO_AVX512");
    if (off != nullptr && std::strcmp(off, "1") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
  }();
  return detected && avx512_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

#ifdef SUBLET_CONV2D_AVX512

namespace {

// V vectors of 16 pixels x 4 channels: 4V accumulators (of 32 registers), the V input vectors
// of a tap shared by the 4 channels, each weight broadcast once per tap.
template <int V>
SUBLET_AVX512 void tile(const float* x, const std::int64_t* offsets, std::int64_t depth,
                        const float* weights, const float* bias, float* const* out,
                        std::int64_t channels, std::int64_t count) {
  __m512 acc[4][V];
  for (int j = 0; j < 4; ++j) {
    for (int v = 0; v < V; ++v) acc[j][v] = _mm512_set1_ps(bias[j]);
  }
  for (std::int64_t k = 0; k < depth; ++k, weights += 4) {
    const float* from = x + offsets[k];
    __m512 in[V];
    for (int v = 0; v < V; ++v) in[v] = _mm512_loadu_ps(from + 16 * v);
    for (int j = 0; j < 4; ++j) {
      const __m512 w = _mm512_set1_ps(weights[j]);
      for (int v = 0; v < V; ++v) acc[j][v] = _mm512_fmadd_ps(in[v], w, acc[j][v]);
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

void tile_avx512(int vectors, const float* x, const std::int64_t* offsets, std::int64_t depth,
                 const float* weights, const float* bias, float* const* out,
                 std::int64_t channels, std::int64_t count) {
  switch (vectors) {
    case 1: return tile<1>(x, offsets, depth, weights, bias, out, channels, count);
    case 2: return tile<2>(x, offsets, depth, weights, bias, out, channels, count);
    case 3: return tile<3>(x, offsets, depth, weights, bias, out, channels, count);
    default: throw Error("conv2d: an AVX-512 tile of 1 to 3 vectors was expected, found " + std::to_string(vectors));
  }
}

#else

void tile_avx512(int, const float*, const std::int64_t*, std::int64_t, const float*, const float*,
                 float* const*, std::int64_t, std::int64_t) {
  throw Error("conv2d: the AVX-512 CPU tiles are not built (needs GCC or Clang on x86-64)");
}

#endif

}  // namespace sublet::ops::cpu
