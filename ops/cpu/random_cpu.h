#pragma once
#include "ops/random.h"

namespace sublet::ops::cpu {
void fill_uniform(DType dtype, void* dst, std::int64_t count, double low, double high, std::mt19937_64& engine);
void fill_normal(DType dtype, void* dst, std::int64_t count, double mean, double stddev, std::mt19937_64& engine);
}
