#pragma once
// The larger of two differences, where NaN counts as larger than anything and stays: std::max
// keeps its first argument when the second is NaN, which let a NaN gradient pass every test
// that compared a running maximum against a tolerance.
#include <cmath>
#include <limits>

namespace sublet::testing {

template <typename T>
T nan_safe_max(T running, T value) {
  if (std::isnan(running) || std::isnan(value)) return std::numeric_limits<T>::quiet_NaN();
  return value > running ? value : running;
}

}  // namespace sublet::testing
