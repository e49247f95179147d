#pragma once
// Random fills on a CUDA device (ops/random.h): the values are drawn on the host by the CPU
// kernel from the same engine and uploaded, so a seed gives bit-identical tensors on the CPU
// and the GPU (the same initial weights on both devices) and the engine advances identically.
#include "ops/random.h"

namespace sublet::ops::cuda {

void fill_uniform(const Context& ctx, DType dtype, void* dst, std::int64_t count, double low, double high,
                  std::mt19937_64& engine);
void fill_normal(const Context& ctx, DType dtype, void* dst, std::int64_t count, double mean, double stddev,
                 std::mt19937_64& engine);

}  // namespace sublet::ops::cuda
