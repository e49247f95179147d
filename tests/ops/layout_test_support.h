#pragma once
// Helpers of the 16-bit and channels-last GPU kernel tests (batch norm, pooling): storage types
// H in {float, BFloat16, Float16} handled alike, NCHW <-> NHWC permutes on the host, and the
// comparison of activations of type H with a float32 reference at a tolerance stated per dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "cuda_test_support.h"
#include "half_test_support.h"
#include "tests/nan_safe_max.h"

namespace sublet::ops::testing {

template <typename H>
inline constexpr bool kIsSixteenBit = std::is_same_v<H, BFloat16> || std::is_same_v<H, Float16>;

template <typename H>
std::string storage_name() {
  return dtype_name(DTypeOf<H>::value);
}

inline std::string format_name(MemoryFormat format) {
  return format == MemoryFormat::ChannelsLast ? "channels-last" : "NCHW";
}

// float32 values stored as H (rounded to nearest even for the 16-bit types).
template <typename H>
std::vector<H> to_storage(const std::vector<float>& values) {
  if constexpr (kIsSixteenBit<H>) {
    return to_half<H>(values);
  } else {
    return values;
  }
}

template <typename H>
std::vector<float> from_storage(const std::vector<H>& values) {
  if constexpr (kIsSixteenBit<H>) {
    return to_float(values);
  } else {
    return values;
  }
}

// The values H can hold: each float32 rounded to H and back (exact float32 inputs for the reference).
template <typename H>
std::vector<float> rounded_to(const std::vector<float>& values) {
  return from_storage(to_storage<H>(values));
}

// [N, C, H, W] dense <-> [N, H, W, C] dense, for any element type.
template <typename T>
std::vector<T> nchw_to_nhwc(const std::vector<T>& in, std::int64_t n, std::int64_t c, std::int64_t h,
                            std::int64_t w) {
  std::vector<T> out(in.size());
  for (std::int64_t a = 0; a < n; ++a)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t y = 0; y < h; ++y)
        for (std::int64_t x = 0; x < w; ++x) out[((a * h + y) * w + x) * c + ch] = in[((a * c + ch) * h + y) * w + x];
  return out;
}

template <typename T>
std::vector<T> nhwc_to_nchw(const std::vector<T>& in, std::int64_t n, std::int64_t c, std::int64_t h,
                            std::int64_t w) {
  std::vector<T> out(in.size());
  for (std::int64_t a = 0; a < n; ++a)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t y = 0; y < h; ++y)
        for (std::int64_t x = 0; x < w; ++x) out[((a * c + ch) * h + y) * w + x] = in[((a * h + y) * w + x) * c + ch];
  return out;
}

// The buffer as the kernel of `format` takes it, and back to NCHW.
template <typename T>
std::vector<T> to_layout(const std::vector<T>& nchw, MemoryFormat format, std::int64_t n, std::int64_t c,
                         std::int64_t h, std::int64_t w) {
  return format == MemoryFormat::ChannelsLast ? nchw_to_nhwc(nchw, n, c, h, w) : nchw;
}

template <typename T>
std::vector<T> from_layout(const std::vector<T>& data, MemoryFormat format, std::int64_t n, std::int64_t c,
                           std::int64_t h, std::int64_t w) {
  return format == MemoryFormat::ChannelsLast ? nhwc_to_nchw(data, n, c, h, w) : data;
}

// Tolerance of an activation of type H (an output or input gradient that the kernel computes in
// float32 and rounds once to H) against its float32 reference: |got - ref| <= rtol * |ref| +
// atol_of_scale * max |ref|. rtol is one ulp of H (the device's float32 result and the
// reference's may lie on either side of a rounding boundary), float32's from the statistics'
// accumulation order (1e-4, as the float32 batch norm tests); atol_of_scale covers values near 0,
// where float32 cancellation in (x - mean) * scale leaves an error of the output's scale.
template <typename H>
struct ActivationTolerance;
template <>
struct ActivationTolerance<float> {
  static constexpr double rtol = 1e-4, atol_of_scale = 1e-4;
};
template <>
struct ActivationTolerance<BFloat16> {
  static constexpr double rtol = 0x1p-7, atol_of_scale = 1e-3;
};
template <>
struct ActivationTolerance<Float16> {
  static constexpr double rtol = 0x1p-10, atol_of_scale = 2e-4;
};

inline double max_magnitude(const std::vector<float>& values) {
  double scale = 0;
  for (float v : values) scale = sublet::testing::nan_safe_max(scale, std::abs(static_cast<double>(v)));
  return scale;
}

// Fails on any element out of tolerance, and on NaN where the reference is a number (and a
// number where it is NaN); names the first few elements and the tolerance.
template <typename H>
void expect_activation_close(const std::vector<H>& got, const std::vector<float>& reference, const std::string& what,
                             double rtol = ActivationTolerance<H>::rtol,
                             double atol_of_scale = ActivationTolerance<H>::atol_of_scale) {
  const double atol = atol_of_scale * max_magnitude(reference);
  if constexpr (kIsSixteenBit<H>) {
    expect_half_close(got, reference, rtol, atol, what + " (" + storage_name<H>() + ")");
  } else {
    expect_close(got, reference, rtol, atol, what + " (float32)");
  }
}

// Two results of type H that must be identical bit for bit (NaN included).
template <typename H>
void expect_bits_equal(const std::vector<H>& got, const std::vector<H>& expected, const std::string& what) {
  if constexpr (kIsSixteenBit<H>) {
    expect_half_bits_equal(got, expected, what);
  } else {
    expect_float_bits_equal(got, expected, what);
  }
}

}  // namespace sublet::ops::testing
