#pragma once
// V consecutive elements of one thread, moved with one 16-byte load or store when V > 1 (V = 1:
// a plain element). The caller checks that the pointers are 16-byte aligned and that the index is
// a multiple of V; ops/cuda/batch_norm_split.cu's passes and reductions use it.
#include <cstdint>

#include "ops/cuda/half_types.cuh"

namespace sublet::ops::cuda {

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T, int V>
__device__ inline Pack<T, V> load_pack(const T* p, std::int64_t i) {
  if constexpr (V == 1) {
    return {{p[i]}};
  } else {
    static_assert(sizeof(Pack<T, V>) == sizeof(uint4), "a pack is one 16-byte vector");
    Pack<T, V> out;
    *reinterpret_cast<uint4*>(out.v) = *reinterpret_cast<const uint4*>(p + i);
    return out;
  }
}

template <typename T, int V>
__device__ inline void store_pack(T* p, std::int64_t i, const Pack<T, V>& pack) {
  if constexpr (V == 1) {
    p[i] = pack.v[0];
  } else {
    *reinterpret_cast<uint4*>(p + i) = *reinterpret_cast<const uint4*>(pack.v);
  }
}

// V floats to a pack of T with the bits of V store_compute<T> calls, converting two at a time for
// the 16-bit types (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32: one conversion instruction, quarter
// rate on sm_90, for two values; each rounds to nearest even on its own). NaN takes the host's
// rule (float_to_half) instead of the instruction's canonical NaN.
template <typename T, int V>
__device__ inline Pack<T, V> pack_from_floats(const float (&v)[V]) {
  Pack<T, V> out;
  if constexpr (kIsHalf<T> && V % 2 == 0) {
#pragma unroll
    for (int j = 0; j < V; j += 2) {
      if constexpr (std::is_same_v<T, __half>) {
        const __half2 two = __floats2half2_rn(v[j], v[j + 1]);
        out.v[j] = __low2half(two), out.v[j + 1] = __high2half(two);
      } else {
        const __nv_bfloat162 two = __floats2bfloat162_rn(v[j], v[j + 1]);
        out.v[j] = __low2bfloat16(two), out.v[j + 1] = __high2bfloat16(two);
      }
      if (v[j] != v[j]) out.v[j] = float_to_half<T>(v[j]);
      if (v[j + 1] != v[j + 1]) out.v[j + 1] = float_to_half<T>(v[j + 1]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = store_compute<T>(v[j]);
  }
  return out;
}

}  // namespace sublet::ops::cuda
