// dropout: keep rate, scaling, reproducibility from (seed, offset), the counter property that
// makes it device-neutral, and the backward against float64 central finite differences.
#include "ops/dropout.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "nn_test_support.h"

namespace sublet::ops {
namespace {

using testing::cpu_context;
using testing::kGradientTolerance;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_values;

std::vector<double> dropout_of(const std::vector<double>& x, double p, std::uint64_t seed, std::uint64_t offset) {
  std::vector<double> out(x.size());
  dropout_forward(cpu_context(), static_cast<std::int64_t>(x.size()), DType::Float64, x.data(), p, seed, offset, out.data());
  return out;
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesKeptValues) {
  const std::int64_t n = 200000;
  const auto x = random_values(n, 1, 0.5, 1.5);  // never 0, so a dropped element is exactly 0
  for (double p : {0.1, 0.5, 0.8}) {
    const auto out = dropout_of(x, p, 42, 0);
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (out[i] != 0) {
        ++kept;
        EXPECT_DOUBLE_EQ(out[i], x[i] / (1 - p));
      }
    }
    // Binomial(n, 1-p): 6 standard deviations.
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(kept), n * (1 - p), 6 * sigma) << "p = " << p;
  }
}

TEST(Dropout, ExtremesOfP) {
  const auto x = random_values(1000, 2, 0.5, 1.5);
  EXPECT_EQ(dropout_of(x, 0.0, 7, 0), x);
  for (double v : dropout_of(x, 1.0, 7, 0)) EXPECT_EQ(v, 0.0);
  std::vector<double> out(x.size());
  EXPECT_THROW(dropout_forward(cpu_context(), 1000, DType::Float64, x.data(), 1.5, 7, 0, out.data()), ValueError);
  EXPECT_THROW(dropout_forward(cpu_context(), 1000, DType::Int64, x.data(), 0.5, 7, 0, out.data()), DTypeError);
}

TEST(Dropout, MaskIsAFunctionOfSeedOffsetAndIndex) {
  const auto x = random_values(4096, 3, 0.5, 1.5);
  EXPECT_EQ(dropout_of(x, 0.5, 11, 0), dropout_of(x, 0.5, 11, 0));  // reproducible
  EXPECT_NE(dropout_of(x, 0.5, 11, 0), dropout_of(x, 0.5, 12, 0));  // seed matters
  EXPECT_NE(dropout_of(x, 0.5, 11, 0), dropout_of(x, 0.5, 11, 4096));  // offset matters
  // Counter-based: the second half of one call equals a call on the second half with the
  // offset advanced by the first half's size, however the work is split across threads.
  const auto whole = dropout_of(x, 0.3, 99, 1000);
  const std::vector<double> second_half(x.begin() + 2048, x.end());
  const auto half = dropout_of(second_half, 0.3, 99, 1000 + 2048);
  EXPECT_TRUE(std::equal(half.begin(), half.end(), whole.begin() + 2048));
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(whole[i] != 0, dropout_keeps(99, 1000 + i, 0.3)) << i;
  }
}

TEST(Dropout, BackwardAppliesTheSameMaskAndMatchesFiniteDifferences) {
  const auto x = random_values(500, 4);
  const auto grad_output = random_values(500, 5);
  std::vector<double> grad_input(x.size());
  dropout_backward(cpu_context(), 500, DType::Float64, grad_output.data(), 0.4, 77, 123, grad_input.data());
  EXPECT_LE(max_relative_error(grad_input, numeric_gradient([&](const std::vector<double>& v) {
              return dropout_of(v, 0.4, 77, 123); }, x, grad_output)), kGradientTolerance);
  const auto out = dropout_of(x, 0.4, 77, 123);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(grad_input[i] == 0, out[i] == 0) << i;
}

TEST(Dropout, Float32UsesTheSameMask) {
  const auto x = random_values(1000, 6, 0.5, 1.5);
  const auto x32 = testing::cast_values<float>(x);
  std::vector<float> out32(x.size());
  dropout_forward(cpu_context(), 1000, DType::Float32, x32.data(), 0.5, 5, 9, out32.data());
  const auto out64 = dropout_of(x, 0.5, 5, 9);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(out32[i] == 0, out64[i] == 0) << i;
  EXPECT_LE(max_relative_error(out32, out64), 1e-6);
}

}  // namespace
}  // namespace sublet::ops
