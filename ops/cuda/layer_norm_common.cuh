#pragma once
// What the layer norm kernels share: the accumulation type, element conversions, the rounding
// that makes a fused step give the bits of the unfused ops, vector packs and the warp sum.
#include <cstdint>
#include <type_traits>

#include "ops/cuda/half_types.cuh"

namespace sublet::ops::cuda::layer_norm_detail {

// float64 accumulates in float64, everything else in float32.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename A, typename T>
__device__ inline A load_as(T v) {
  return static_cast<A>(load_compute(v));
}

template <typename T, typename A>
__device__ inline T store_as(A v) {
  return store_compute<T>(static_cast<ComputeType<T>>(v));
}

// v as the unfused op stores it (rounded to T) and the next one reads it back.
template <typename T, typename A>
__device__ inline A round_through(A v) {
  return load_as<A>(store_as<T>(v));
}

// a + b rounded on its own: never contracted with the product that made a (the unfused ops
// round that product before the add).
__device__ inline float add_rounded(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rounded(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float mul_rounded(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rounded(double a, double b) { return __dmul_rn(a, b); }

// (v - mean) * rstd * weight + bias, each step rounded on its own: the same bits whatever the
// output type the caller stores it in.
template <typename A>
__device__ inline A normalize(A v, A mean, A rstd, bool has_weight, A w, bool has_bias, A b) {
  A t = mul_rounded(v - mean, rstd);
  if (has_weight) t = mul_rounded(t, w);
  if (has_bias) t = add_rounded(t, b);
  return t;
}

// N consecutive elements moved with one access of N * sizeof(T) bytes.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <int N, typename A, typename T>
__device__ inline void load_pack(const T* p, A (&out)[N]) {
  const Pack<T, N> pack = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = load_as<A>(pack.v[j]);
}

template <int N, typename T, typename A>
__device__ inline void store_pack(T* p, const A (&in)[N]) {
  Pack<T, N> pack;
#pragma unroll
  for (int j = 0; j < N; ++j) pack.v[j] = store_as<T>(in[j]);
  *reinterpret_cast<Pack<T, N>*>(p) = pack;
}

// Every lane gets the sum, combined in the same butterfly order on every run.
template <typename A>
__device__ inline A warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace sublet::ops::cuda::layer_norm_detail
