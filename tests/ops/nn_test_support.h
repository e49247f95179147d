#pragma once
// Helpers shared by the NN kernel tests: seeded random data (never zeros), a CPU context,
// and float64 central finite differences of d/dx sum(forward(x) * weights).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/context.h"
#include "tests/nan_safe_max.h"

namespace sublet::ops::testing {

inline Context cpu_context() { return Context::for_device(Device::cpu()); }

// Uniform in [low, high); the default range stays away from 0 neither in sign nor size, so
// no gradient can pass by being multiplied by zeros.
template <typename T = double>
std::vector<T> random_values(std::int64_t count, std::uint64_t seed, double low = -1.0, double high = 1.0) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<T> values(static_cast<std::size_t>(count));
  for (T& v : values) v = static_cast<T>(dist(engine));
  return values;
}

template <typename To, typename From>
std::vector<To> cast_values(const std::vector<From>& values) {
  return std::vector<To>(values.begin(), values.end());
}

// Central differences of sum(forward(x) * weights) with respect to x, in float64.
// forward: std::vector<double>(const std::vector<double>& x).
template <typename Forward>
std::vector<double> numeric_gradient(Forward&& forward, std::vector<double> x,
                                     const std::vector<double>& weights, double step = 1e-6) {
  auto weighted_sum = [&](const std::vector<double>& at) {
    const std::vector<double> out = forward(at);
    double sum = 0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * weights[i];
    return sum;
  };
  std::vector<double> gradient(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double plus = weighted_sum(x);
    x[i] = saved - step;
    const double minus = weighted_sum(x);
    x[i] = saved;
    gradient[i] = (plus - minus) / (2 * step);
  }
  return gradient;
}

// max |actual - expected| / max |expected|: one number for a whole gradient, so that tiny
// entries do not blow up the ratio while any entry that is wrong still shows.
inline double max_relative_error(const std::vector<double>& actual, const std::vector<double>& expected) {
  double difference = 0, scale = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    difference = sublet::testing::nan_safe_max(difference, std::abs(actual[i] - expected[i]));
    scale = sublet::testing::nan_safe_max(scale, std::abs(expected[i]));
  }
  return scale > 0 ? difference / scale : difference;
}

template <typename T>
double max_relative_error(const std::vector<T>& actual, const std::vector<double>& expected) {
  return max_relative_error(cast_values<double>(actual), expected);
}

// The relative error every float64 gradient in these tests must meet (CONTRIBUTING.md).
inline constexpr double kGradientTolerance = 1e-6;

}  // namespace sublet::ops::testing
