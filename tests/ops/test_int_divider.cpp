// The multiply-shift divider of the CUDA index arithmetic (ops/cuda/int_divider.h) against the
// plain division it replaces: every dividend below 2^16 for the small divisors, and around
// every multiple, the powers of two and the top of the range for small, large and random ones.
// The host path computes the same multiply-high as the device's __umulhi.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/errors.h"
#include "ops/cuda/int_divider.h"

namespace sublet::ops::cuda {
namespace {

constexpr std::uint32_t kMaxDividend = (1u << 31) - 1;

::testing::AssertionResult divides(const IntDivider& d, std::uint32_t n) {
  std::uint32_t q = 0, r = 0;
  d.divmod(n, q, r);
  if (q == n / d.divisor() && r == n % d.divisor()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << n << " divmod " << d.divisor() << " gave " << q << ", " << r
                                       << "; expected " << n / d.divisor() << ", " << n % d.divisor();
}

std::vector<std::uint32_t> edge_dividends(std::uint32_t divisor) {
  std::vector<std::uint32_t> out{0, 1, kMaxDividend, kMaxDividend - 1};
  for (std::uint64_t k : {1ull, 2ull, 3ull, 1000ull, 65537ull}) {
    const std::uint64_t m = k * divisor;
    for (std::uint64_t n : {m - 1, m, m + 1}) {
      if (n <= kMaxDividend) out.push_back(static_cast<std::uint32_t>(n));
    }
  }
  const std::uint64_t top = kMaxDividend / divisor * divisor;  // the largest multiple in range
  for (std::uint64_t n : {top - 1, top, top + 1}) {
    if (n <= kMaxDividend) out.push_back(static_cast<std::uint32_t>(n));
  }
  for (int s = 0; s < 31; ++s) {
    out.push_back((1u << s) - 1);
    out.push_back(1u << s);
  }
  return out;
}

TEST(IntDivider, SmallDivisorsExhaustivelyBelow65536) {
  for (std::uint32_t divisor = 1; divisor <= 300; ++divisor) {
    const IntDivider d(divisor);
    for (std::uint32_t n = 0; n < (1u << 16); ++n) ASSERT_TRUE(divides(d, n));
    for (std::uint32_t n : edge_dividends(divisor)) ASSERT_TRUE(divides(d, n));
  }
}

TEST(IntDivider, PoolingAndImageSizesAndEdgesOfTheRange) {
  std::vector<std::uint32_t> divisors{7, 14, 28, 56, 112, 224, 3136, 12544, 802816, 65535, 65536, 65537,
                                      (1u << 30) - 1, 1u << 30, (1u << 30) + 1, kMaxDividend - 1, kMaxDividend};
  for (int s = 0; s < 31; ++s) divisors.push_back(1u << s);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<std::uint32_t>(rng() % kMaxDividend) + 1);
  for (std::uint32_t divisor : divisors) {
    const IntDivider d(divisor);
    for (std::uint32_t n : edge_dividends(divisor)) ASSERT_TRUE(divides(d, n));
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE(divides(d, static_cast<std::uint32_t>(rng() % (kMaxDividend + 1ull))));
  }
}

TEST(IntDivider, RefusesDivisorsOutsideItsRange) {
  EXPECT_THROW(IntDivider(0), ValueError);
  EXPECT_THROW(IntDivider(-3), ValueError);
  EXPECT_THROW(IntDivider(std::int64_t{1} << 31), ValueError);
  EXPECT_NO_THROW(IntDivider((std::int64_t{1} << 31) - 1));
}

}  // namespace
}  // namespace sublet::ops::cuda
