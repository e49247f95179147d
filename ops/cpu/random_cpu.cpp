#include "ops/cpu/random_cpu.h"

#include <cmath>
#include <numbers>

#include "ops/cpu/dtype_dispatch.h"

namespace sublet::ops::cpu {

void fill_uniform(DType dtype, void* dst, std::int64_t count, double low, double high, std::mt19937_64& engine) {
  dispatch_floating(dtype, "uniform", [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst);
    for (std::int64_t i = 0; i < count; ++i) d[i] = static_cast<T>(low + (high - low) * uniform01(engine));
  });
}

void fill_normal(DType dtype, void* dst, std::int64_t count, double mean, double stddev, std::mt19937_64& engine) {
  dispatch_floating(dtype, "normal", [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst);
    // Box-Muller: two uniforms give two independent normals.
    for (std::int64_t i = 0; i < count; i += 2) {
      const double u1 = 1.0 - uniform01(engine);  // (0, 1]: log stays finite
      const double u2 = uniform01(engine);
      const double radius = std::sqrt(-2.0 * std::log(u1));
      const double angle = 2.0 * std::numbers::pi * u2;
      d[i] = static_cast<T>(mean + stddev * radius * std::cos(angle));
      if (i + 1 < count) d[i + 1] = static_cast<T>(mean + stddev * radius * std::sin(angle));
    }
  });
}

}  // namespace sublet::ops::cpu
