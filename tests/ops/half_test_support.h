#pragma once
// How the 16-bit kernels' results are judged against a float32 reference (the float32 CPU
// kernel on the same inputs, converted exactly to float32). Plain C++ over core/half.h, so the
// judging itself is tested on the CPU (tests/ops/test_half_compare.cpp) before any GPU runs it.
//
// A kernel that computes in float32 and rounds once to 16 bits is off its float32 reference by
// at most half an ulp of the 16-bit type, plus what its float32 arithmetic differs by (FMA
// contraction, the device's expf/logf: a few float32 ulps). Half an ulp is at most 2^-8 of the
// value for bfloat16 (8 significant bits) and 2^-11 for float16 (11 bits); below the normal
// range it is half the subnormal step instead: 2^-25 for float16, 2^-134 for bfloat16.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"

namespace sublet::ops::testing {

template <typename H>
struct HalfTolerance;

template <>
struct HalfTolerance<BFloat16> {
  static constexpr double rounding_rtol = 0x1p-8;    // half an ulp of 8 significant bits
  static constexpr double rounding_atol = 0x1p-134;  // half the subnormal step
};

template <>
struct HalfTolerance<Float16> {
  static constexpr double rounding_rtol = 0x1p-11;  // half an ulp of 11 significant bits
  static constexpr double rounding_atol = 0x1p-25;  // half the subnormal step (2^-24)
};

// float32 arithmetic differences between the device and the CPU reference, relative: the
// float32 element-wise tests' tolerance (tests/ops/test_cuda_elementwise.cpp).
inline constexpr double kFloat32ComputeRtol = 1e-6;

template <typename H>
H half_of(float f) {
  return H(f);
}

template <typename H>
std::vector<H> to_half(const std::vector<float>& values) {
  std::vector<H> out;
  out.reserve(values.size());
  for (float v : values) out.push_back(H(v));
  return out;
}

template <typename H>
std::vector<float> to_float(const std::vector<H>& values) {
  std::vector<float> out;
  out.reserve(values.size());
  for (H v : values) out.push_back(static_cast<float>(v));
  return out;
}

// Does a 16-bit result match its float32 reference? Yes when its bits are the host rounding of
// the reference (core/half.h: so an overflow to infinity or a NaN matches exactly that), or when
// |got - reference| <= rtol * |reference| + atol. A NaN never passes the second test, so a NaN
// where the reference is a number fails, and so does a number where the reference is NaN; an
// infinity passes only as the host rounding's own infinity.
template <typename H>
bool half_matches(H got, float reference, double rtol, double atol) {
  if (got.bits == H(reference).bits) return true;
  const double g = static_cast<double>(static_cast<float>(got)), r = static_cast<double>(reference);
  if (std::isnan(g) && std::isnan(r)) return true;  // both NaN: payloads may differ (device math)
  // An infinite reference would make rtol * |reference| infinite and let anything through.
  if (!std::isfinite(g) || !std::isfinite(r)) return false;
  return std::abs(g - r) <= rtol * std::abs(r) + atol;
}

// Every element; names the first few that fail, with their bits. `atol_per_element` (optional,
// same length) adds an element's own absolute allowance (a sum's float32 accumulation error).
template <typename H>
void expect_half_close(const std::vector<H>& got, const std::vector<float>& reference, double rtol, double atol,
                       const std::string& what, const std::vector<double>& atol_per_element = {}) {
  ASSERT_EQ(got.size(), reference.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double extra = atol_per_element.empty() ? 0.0 : atol_per_element[i];
    if (half_matches(got[i], reference[i], rtol, atol + extra)) continue;
    if (bad < 5) {
      char bits[16];
      std::snprintf(bits, sizeof bits, "0x%04x", static_cast<unsigned>(got[i].bits));
      ADD_FAILURE() << what << "[" << i << "]: got " << static_cast<float>(got[i]) << " (" << bits << "), reference "
                    << reference[i] << " (host rounding " << static_cast<float>(H(reference[i])) << ")";
    }
    ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << reference.size() << " elements outside rtol " << rtol
                     << ", atol " << atol;
}

// Bit-for-bit equality of 16-bit values (NaN bits included: the device casts must reproduce them).
template <typename H>
void expect_half_bits_equal(const std::vector<H>& got, const std::vector<H>& expected, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (got[i].bits == expected[i].bits) continue;
    if (bad < 5) {
      char text[64];
      std::snprintf(text, sizeof text, "got 0x%04x, expected 0x%04x", static_cast<unsigned>(got[i].bits),
                    static_cast<unsigned>(expected[i].bits));
      ADD_FAILURE() << what << "[" << i << "]: " << text;
    }
    ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << expected.size() << " elements differ";
}

// The same for float32/float64 results, compared as bits (NaN payloads included).
template <typename F>
void expect_float_bits_equal(const std::vector<F>& got, const std::vector<F>& expected, const std::string& what) {
  using Bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  ASSERT_EQ(got.size(), expected.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Bits g = std::bit_cast<Bits>(got[i]), e = std::bit_cast<Bits>(expected[i]);
    if (g == e) continue;
    if (bad < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " (bits " << std::hex << g << "), expected "
                    << expected[i] << " (bits " << e << ")" << std::dec;
    }
    ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << expected.size() << " elements differ";
}

// Inputs that exercise a 16-bit kernel: `count` uniform values in [low, high] rounded to H, with
// the special values of H written over the first positions: +-0, +-inf, NaN, the smallest and
// largest subnormals, the smallest normal, the largest finite value and values just below it.
template <typename H>
std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, nan, 1.0f, -1.0f};
  const auto from_bits = [](std::uint16_t bits) {
    H h;
    h.bits = bits;
    return static_cast<float>(h);
  };
  for (std::uint16_t bits : {0x0001, 0x8001, 0x0002, 0x0003}) v.push_back(from_bits(bits));  // subnormals
  if constexpr (std::is_same_v<H, Float16>) {
    for (std::uint16_t bits : {0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7bfe, 0x7b00, 0x7a00}) v.push_back(from_bits(bits));
  } else {
    for (std::uint16_t bits : {0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7f7e, 0x7f00}) v.push_back(from_bits(bits));
  }
  return v;
}

// Every float32 upper half with lower halves that decide the rounding of both 16-bit types:
// bfloat16 keeps the upper 16 bits (tie at 0x8000), float16 normals keep 13 fraction bits fewer
// (tie at 0x1000 of the lower bits) and its subnormals fewer still (ties up to bit 23, reached
// by the upper halves themselves), plus random lower halves.
inline std::vector<float> float32_sweep() {
  static const std::uint16_t kLows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001, 0x3000,
                                        0x3fff, 0x4000, 0x4001, 0x7fff, 0x8000, 0x8001, 0x9000, 0xbfff, 0xc000,
                                        0xe000, 0xefff, 0xf000, 0xffff};
  std::mt19937 engine(2026);
  std::vector<float> out;
  out.reserve(65536u * (std::size(kLows) + 10));
  for (std::uint32_t high = 0; high < 65536; ++high) {
    for (std::uint16_t low : kLows) out.push_back(std::bit_cast<float>((high << 16) | low));
    for (int r = 0; r < 10; ++r) {
      out.push_back(std::bit_cast<float>((high << 16) | static_cast<std::uint32_t>(engine() & 0xffffu)));
    }
  }
  return out;
}

}  // namespace sublet::ops::testing
