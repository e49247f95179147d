#pragma once
// CPU dropout: forward and backward are the same masked scaling, so one kernel serves both.
#include <cstdint>

namespace sublet::ops::cpu {

// output[i] = dropout_keeps(seed, offset + i, p) ? input[i] * scale : 0.
template <typename T>
void dropout_apply(std::int64_t numel, const T* input, double p, std::uint64_t seed,
                   std::uint64_t offset, T* output);

}  // namespace sublet::ops::cpu
