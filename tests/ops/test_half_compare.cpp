// The judge of the 16-bit GPU kernel tests (tests/ops/half_test_support.h), on the CPU: the host
// rounding of the reference passes, one rounding's worth of difference passes, two ulps fail,
// NaN passes only against NaN, an infinity only as the reference's own rounding.
#include "half_test_support.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <limits>

namespace sublet::ops::testing {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

template <typename H>
H from_bits(std::uint16_t bits) {
  H h;
  h.bits = bits;
  return h;
}

template <typename H>
void check_judge() {
  const double rtol = HalfTolerance<H>::rounding_rtol + kFloat32ComputeRtol;
  const double atol = HalfTolerance<H>::rounding_atol;
  // Just below the midpoint between 1 and the next value: the host rounds down to 1; the next
  // value up is still within one rounding (a float32 result a few ulps off would have rounded
  // up); two ulps up is not.
  const H one(1.0f);
  const H next = from_bits<H>(static_cast<std::uint16_t>(one.bits + 1));
  const H two_up = from_bits<H>(static_cast<std::uint16_t>(one.bits + 2));
  const float reference = 1.0f + 0.4995f * (static_cast<float>(next) - 1.0f);
  EXPECT_TRUE(half_matches(one, reference, rtol, atol));
  EXPECT_TRUE(half_matches(next, reference, rtol, atol));  // the other neighbour: float32 differences
  EXPECT_FALSE(half_matches(two_up, reference, rtol, atol));
  // NaN: only against NaN, whatever the payload.
  EXPECT_TRUE(half_matches(H(kNaN), kNaN, rtol, atol));
  EXPECT_TRUE(half_matches(from_bits<H>(0xffff), kNaN, rtol, atol));
  EXPECT_FALSE(half_matches(H(kNaN), 1.0f, rtol, atol));
  EXPECT_FALSE(half_matches(H(kNaN), 1.0f, 1e30, 1e30));  // no tolerance lets a NaN through
  EXPECT_FALSE(half_matches(one, kNaN, 1e30, 1e30));
  // Infinities: the same infinity passes, the other sign and any finite value fail.
  EXPECT_TRUE(half_matches(H(kInf), kInf, rtol, atol));
  EXPECT_FALSE(half_matches(H(-kInf), kInf, rtol, atol));
  const H largest = from_bits<H>(std::is_same_v<H, Float16> ? 0x7bff : 0x7f7f);
  EXPECT_FALSE(half_matches(largest, kInf, rtol, atol));
  // Subnormals: half the subnormal step passes at zero, a whole step does not.
  const H smallest = from_bits<H>(0x0001);
  EXPECT_TRUE(half_matches(H(0.0f), static_cast<float>(smallest) * 0.5f, rtol, atol));
  EXPECT_FALSE(half_matches(from_bits<H>(0x0002), 0.0f, rtol, atol));
}

TEST(HalfCompare, BFloat16JudgeAcceptsOneRoundingAndRejectsNaNAndTwoUlps) { check_judge<BFloat16>(); }
TEST(HalfCompare, Float16JudgeAcceptsOneRoundingAndRejectsNaNAndTwoUlps) { check_judge<Float16>(); }

TEST(HalfCompare, Float16OverflowMatchesOnlyAsTheHostRoundingsInfinity) {
  const double rtol = HalfTolerance<Float16>::rounding_rtol, atol = HalfTolerance<Float16>::rounding_atol;
  // 65520 rounds to infinity on the host; a kernel that wrote it must have written infinity,
  // and 65504 (within half an ulp of 65520) passes as a rounding of a float32 just below it.
  EXPECT_TRUE(half_matches(Float16(kInf), 65520.0f, rtol, atol));
  EXPECT_TRUE(half_matches(Float16(65504.0f), 65520.0f, rtol, atol));
  EXPECT_FALSE(half_matches(Float16(kInf), 65504.0f, rtol, atol));
  EXPECT_FALSE(half_matches(Float16(kInf), 1.0e5f * 0.5f, rtol, atol));
}

template <typename H>
void check_special_values(float largest) {
  bool has_nan = false, has_inf = false, has_largest = false, has_subnormal = false;
  for (float v : special_values<H>()) {
    has_nan = has_nan || std::isnan(v);
    has_inf = has_inf || v == kInf;
    has_largest = has_largest || v == largest;
    has_subnormal = has_subnormal || (v != 0.0f && std::abs(v) < static_cast<float>(from_bits<H>(0x0080)));
    if (!std::isnan(v)) {
      EXPECT_EQ(static_cast<float>(H(v)), v) << v;  // each one exact in H
    }
  }
  EXPECT_TRUE(has_nan && has_inf && has_largest && has_subnormal);
}

TEST(HalfCompare, SpecialValuesHoldTheirTypesEdgeCases) {
  check_special_values<Float16>(65504.0f);
  check_special_values<BFloat16>(static_cast<float>(from_bits<BFloat16>(0x7f7f)));
}

TEST(HalfCompare, ExpectHalfCloseReportsEachFailure) {
  // A failing comparison must fail the test: run it in a nested assertion scope.
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    expect_half_close(std::vector<BFloat16>{BFloat16(1.0f), BFloat16(kNaN)}, {1.0f, 2.0f}, 0x1p-8, 0.0, "probe");
  }
  EXPECT_GE(failures.size(), 2);  // the NaN element and the summary
}

}  // namespace
}  // namespace sublet::ops::testing
