#pragma once
// The two 16-bit floating-point storage types, as PyTorch's c10::BFloat16 and c10::Half: bits in
// memory, float32 for arithmetic. Conversions from float32 round to nearest, ties to even;
// conversions to float32 are exact. NaN stays NaN (quiet); float16 overflows to infinity past
// 65504 and has subnormals down to 2^-24; bfloat16 has float32's range with 8 bits of precision.
// Other types convert through float32 (double -> float32 -> 16 bits rounds twice, as PyTorch).
#include <bit>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace sublet {

namespace half_detail {

constexpr std::uint16_t bfloat16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);  // ties to even
  return static_cast<std::uint16_t>((x + rounding) >> 16);
}

constexpr float bfloat16_value(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

constexpr std::uint16_t float16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent < -25) return sign;  // below half the smallest subnormal: zero
  std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;  // with the implicit bit
  // Normal results keep 10 of the 23 fraction bits; subnormal ones fewer, by how far below 2^-14.
  const int shift = exponent >= -14 ? 13 : 13 + (-14 - exponent);
  const std::uint32_t dropped = mantissa & ((1u << shift) - 1u);
  const std::uint32_t half_way = 1u << (shift - 1);
  mantissa >>= shift;
  if (dropped > half_way || (dropped == half_way && (mantissa & 1u))) ++mantissa;  // ties to even
  if (exponent >= -14) {
    // A carry out of the mantissa moves to the next exponent, which the addition does by itself.
    return static_cast<std::uint16_t>(sign | ((static_cast<std::uint32_t>(exponent + 15) << 10) + (mantissa - 0x400u)));
  }
  return static_cast<std::uint16_t>(sign | mantissa);  // subnormal (a carry makes it the smallest normal)
}

constexpr float float16_value(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Subnormal: mantissa * 2^-24, exact in float32.
  const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
  return sign ? -magnitude : magnitude;
}

}  // namespace half_detail

struct BFloat16 {
  std::uint16_t bits = 0;
  constexpr BFloat16() = default;
  constexpr explicit BFloat16(float f) : bits(half_detail::bfloat16_bits(f)) {}
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>>>
  constexpr explicit BFloat16(T v) : BFloat16(static_cast<float>(v)) {}
  constexpr explicit operator float() const { return half_detail::bfloat16_value(bits); }
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>>>
  constexpr explicit operator T() const { return static_cast<T>(static_cast<float>(*this)); }
};

struct Float16 {
  std::uint16_t bits = 0;
  constexpr Float16() = default;
  constexpr explicit Float16(float f) : bits(half_detail::float16_bits(f)) {}
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>>>
  constexpr explicit Float16(T v) : Float16(static_cast<float>(v)) {}
  constexpr explicit Float16(BFloat16 v) : Float16(static_cast<float>(v)) {}
  constexpr explicit operator float() const { return half_detail::float16_value(bits); }
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>>>
  constexpr explicit operator T() const { return static_cast<T>(static_cast<float>(*this)); }
  constexpr explicit operator BFloat16() const { return BFloat16(static_cast<float>(*this)); }
};

static_assert(sizeof(BFloat16) == 2 && sizeof(Float16) == 2);

template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct DTypeOf<Float16> { static constexpr DType value = DType::Float16; };

}  // namespace sublet
