#pragma once
// CUDA dropout behind ops/dropout.h: the same counter-based mask (dropout_keeps), so a
// (seed, offset) drops the same elements on the CPU and the GPU.
#include "ops/dropout.h"

namespace sublet::ops::cuda {

// output[i] = keep(i) ? input[i] * (1 / (1 - p)) : 0; backward is the same call on the gradient.
void dropout_apply(const Context& ctx, std::int64_t numel, DType dtype, const void* input, double p,
                   std::uint64_t seed, std::uint64_t offset, void* output);

}  // namespace sublet::ops::cuda
