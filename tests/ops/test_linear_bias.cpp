// The linear with bias (ops/linear_bias.h) on the CPU: x w^T + bias against a plain triple loop
// in float64 on random data, float32 and float64; the empty cases; the size and dtype errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "ops/linear_bias.h"

using namespace sublet;
using namespace sublet::ops;

namespace {

template <typename T>
std::vector<T> random_values(std::size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<T> values(count);
  for (T& v : values) v = static_cast<T>(uniform(generator));
  return values;
}

template <typename T>
void check_against_loops(std::int64_t m, std::int64_t k, std::int64_t n, double tolerance) {
  const auto x = random_values<T>(static_cast<std::size_t>(m * k), 1);
  const auto w = random_values<T>(static_cast<std::size_t>(n * k), 2);
  const auto bias = random_values<T>(static_cast<std::size_t>(n), 3);
  std::vector<T> out(static_cast<std::size_t>(m * n), T(-7));
  ASSERT_TRUE(linear_bias(Context::for_device(Device::cpu()), DTypeOf<T>::value, {m, k, n}, out.data(), x.data(),
                          w.data(), bias.data()));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double expected = static_cast<double>(bias[j]);
      for (std::int64_t p = 0; p < k; ++p) expected += static_cast<double>(x[i * k + p]) * w[j * k + p];
      ASSERT_NEAR(out[i * n + j], expected, tolerance) << "m " << m << " k " << k << " n " << n << " at " << i << ", " << j;
    }
  }
}

TEST(LinearBiasCpu, MatchesLoopsOnOddSizes) {
  for (auto [m, k, n] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 1, 1}, {7, 13, 5}, {33, 65, 17},
                         {64, 96, 48}}) {
    check_against_loops<double>(m, k, n, 1e-12);
    check_against_loops<float>(m, k, n, 1e-4);
  }
}

TEST(LinearBiasCpu, EmptyProductWritesTheBias) {
  const std::vector<double> bias = {1.5, -2.0, 3.25};
  std::vector<double> out(6, 99.0);
  ASSERT_TRUE(linear_bias(Context::for_device(Device::cpu()), DType::Float64, {2, 0, 3}, out.data(), nullptr,
                          nullptr, bias.data()));
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], bias[i % 3]) << i;
}

TEST(LinearBiasCpu, RejectsNegativeSizesAndUnsupportedDTypes) {
  std::vector<double> buffer(4, 0.0);
  const Context cpu = Context::for_device(Device::cpu());
  EXPECT_THROW(linear_bias(cpu, DType::Float64, {-1, 2, 2}, buffer.data(), buffer.data(), buffer.data(), buffer.data()),
               ShapeError);
  EXPECT_THROW(linear_bias(cpu, DType::Int64, {1, 1, 1}, buffer.data(), buffer.data(), buffer.data(), buffer.data()),
               DTypeError);
  EXPECT_TRUE(has_linear_bias(Device::cpu(), DType::Float32));
  EXPECT_FALSE(has_linear_bias(Device::cpu(), DType::BFloat16));
  EXPECT_EQ(linear_bias_fallbacks(), 0);  // the CPU kernel always takes the call
}

}  // namespace
