#pragma once
// Random fills from a std::mt19937_64 engine. The values depend only on the engine's state:
// generation is sequential and uses its own uniform/normal transforms (not <random>'s
// distributions, whose algorithms differ between standard libraries), so a seed gives the same
// tensor on every platform.
#include <cstdint>
#include <random>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

// `count` contiguous elements of float32/float64 (DTypeError for int64).
void fill_uniform(const Context& ctx, DType dtype, void* dst, std::int64_t count, double low, double high,
                  std::mt19937_64& engine);
void fill_normal(const Context& ctx, DType dtype, void* dst, std::int64_t count, double mean, double stddev,
                 std::mt19937_64& engine);

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& engine) { return static_cast<double>(engine() >> 11) * 0x1.0p-53; }

}  // namespace sublet::ops
