#pragma once
// V consecutive elements of one thread, moved with one 16-byte load or store when V > 1 (V = 1:
// a plain element). The caller checks that the pointers are 16-byte aligned and that the index is
// a multiple of V; ops/cuda/batch_norm_split.cu's passes and reductions use it.
#include <cstdint>

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

}  // namespace sublet::ops::cuda
