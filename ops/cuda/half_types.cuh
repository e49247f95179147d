#pragma once
// The 16-bit storage types in device code (CUDA's __nv_bfloat16 and __half) and what the kernels
// need around them: the compute type (float for both: load 16 bits, compute in float32, store 16
// bits, as PyTorch's opmath type), conversions that give the same bits as core/half.h's host
// conversions, and a dtype dispatch that hands kernels the device types.
//
// Same bits as the host: the hardware conversions (cvt.rn.bf16.f32, cvt.rn.f16.f32) round to
// nearest even, keep subnormals (no .ftz) and overflow to infinity exactly as core/half.h does;
// only NaN differs (the hardware writes a canonical NaN, the host keeps the sign and the high
// payload bits), so NaN takes the host's formula here. bfloat16 -> float32 is the host's shift;
// float16 -> float32 (cvt.f32.f16) is exact, and its NaN again takes the host's formula.
// tests/ops/test_cuda_half_copy.cpp checks all 65,536 patterns each way and a float32 sweep on
// the GPU. The conversions are __host__ __device__: compiled for the host, CUDA's intrinsics run
// their software emulation of the same rounding, and tests/ops/test_half_types_host.cpp checks
// that build (the NaN rule, the dispatch between types) against core/half.h on the CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <bit>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/errors.h"
#include "ops/cpu/dtype_dispatch.h"

namespace sublet::ops::cuda {

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

// The type a kernel computes in for storage type T.
template <typename T>
using ComputeType = std::conditional_t<kIsHalf<T>, float, T>;

// Bit moves that compile on both sides (__float_as_uint and friends are device-only).
__host__ __device__ inline unsigned float_as_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  return std::bit_cast<unsigned>(f);
#endif
}
__host__ __device__ inline float bits_as_float(unsigned u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}
__host__ __device__ inline unsigned long long double_as_bits(double d) {
#ifdef __CUDA_ARCH__
  return static_cast<unsigned long long>(__double_as_longlong(d));
#else
  return std::bit_cast<unsigned long long>(d);
#endif
}
__host__ __device__ inline double bits_as_double(unsigned long long u) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(u));
#else
  return std::bit_cast<double>(u);
#endif
}

__host__ __device__ inline float half_to_float(__nv_bfloat16 h) {
  return bits_as_float(static_cast<unsigned>(__bfloat16_as_ushort(h)) << 16);
}

__host__ __device__ inline float half_to_float(__half h) {
  const unsigned bits = __half_as_ushort(h);
  if ((bits & 0x7fffu) > 0x7c00u) {  // NaN: sign, all-ones exponent, the payload moved up
    return bits_as_float(((bits & 0x8000u) << 16) | 0x7f800000u | ((bits & 0x3ffu) << 13));
  }
  return __half2float(h);
}

template <typename H>
__host__ __device__ inline H float_to_half(float f);

template <>
__host__ __device__ inline __nv_bfloat16 float_to_half<__nv_bfloat16>(float f) {
  const unsigned x = float_as_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16(static_cast<unsigned short>((x >> 16) | 0x40u));
  return __float2bfloat16_rn(f);
}

template <>
__host__ __device__ inline __half float_to_half<__half>(float f) {
  const unsigned x = float_as_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return __ushort_as_half(static_cast<unsigned short>(((x >> 16) & 0x8000u) | 0x7e00u));
  }
  return __float2half_rn(f);
}

// x > 0 read from the storage bits, without a conversion (float16's cvt is a quarter-rate
// instruction on sm_90): the 16-bit positive values are the patterns from 1 to +inf. NaN: false.
template <typename T>
__device__ inline bool is_positive(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<unsigned>(__half_as_ushort(x)) - 1u < 0x7c00u;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return static_cast<unsigned>(__bfloat16_as_ushort(x)) - 1u < 0x7f80u;
  } else {
    return x > T(0);
  }
}

// Storage -> compute and back; the identity for float32, float64 and int64.
template <typename T>
__host__ __device__ inline ComputeType<T> load_compute(T x) {
  if constexpr (kIsHalf<T>) {
    return half_to_float(x);
  } else {
    return x;
  }
}

template <typename T>
__host__ __device__ inline T store_compute(ComputeType<T> v) {
  if constexpr (kIsHalf<T>) {
    return float_to_half<T>(v);
  } else {
    return v;
  }
}

// float32 <-> float64 of a NaN as the host's conversion instructions do it (x86-64 cvtss2sd and
// cvtsd2ss, arm64 fcvt): the sign and the leading payload bits kept, the quiet bit set; the
// device's cvt need not keep the payload. Numbers convert as on the host (widening is exact,
// narrowing rounds to nearest even without flushing subnormals). Used where a 16-bit value meets
// float64, so that those casts give the CPU kernel's bits too.
__host__ __device__ inline double widen_like_host(float f) {
  if (f != f) {
    const unsigned x = float_as_bits(f);
    return bits_as_double((static_cast<unsigned long long>(x >> 31) << 63) | 0x7ff8000000000000ull |
                          (static_cast<unsigned long long>(x & 0x7fffffu) << 29));
  }
  return static_cast<double>(f);
}

__host__ __device__ inline float narrow_like_host(double d) {
  if (d != d) {
    const unsigned long long x = double_as_bits(d);
    return bits_as_float((static_cast<unsigned>(x >> 63) << 31) | 0x7fc00000u |
                         static_cast<unsigned>((x >> 29) & 0x7fffffu));
  }
  return static_cast<float>(d);
}

// The CPU copy kernel's static_cast<D>(S) (ops/cpu/copy_cpu.cpp with core/half.h's types):
// 16-bit values go through float32 both ways, and a 16-bit copy to its own type keeps its bits.
template <typename D, typename S>
__host__ __device__ inline D convert_element(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (kIsHalf<S>) {
    const float f = half_to_float(s);
    if constexpr (kIsHalf<D>) {
      return float_to_half<D>(f);
    } else if constexpr (std::is_same_v<D, double>) {
      return widen_like_host(f);
    } else {
      return static_cast<D>(f);
    }
  } else if constexpr (kIsHalf<D>) {
    if constexpr (std::is_same_v<S, double>) {
      return float_to_half<D>(narrow_like_host(s));
    } else {
      return float_to_half<D>(static_cast<float>(s));
    }
  } else {
    return static_cast<D>(s);
  }
}

// cpu::dispatch_dtype with the 16-bit types as well, as their device types: f(T{}).
template <typename F>
void dispatch_device_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::BFloat16: f(__nv_bfloat16{}); return;
    case DType::Float16: f(__half{}); return;
    default: cpu::dispatch_dtype(dtype, static_cast<F&&>(f));
  }
}

// The floating-point types: float32, float64, bfloat16, float16 (DTypeError naming `op` else).
template <typename F>
void dispatch_device_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::BFloat16: f(__nv_bfloat16{}); return;
    case DType::Float16: f(__half{}); return;
    default: cpu::dispatch_floating(dtype, op, static_cast<F&&>(f));
  }
}

}  // namespace sublet::ops::cuda
