#pragma once
// Dropout with a counter-based mask: element i is kept iff dropout_keeps(seed, offset + i, p).
// The mask is a pure function of (seed, offset, index), so it is reproducible, the same on
// every device, and never stored: backward regenerates it from the same (seed, offset).
// A caller that draws masks for several tensors from one seed advances `offset` by each
// tensor's numel (Philox-style), so masks never overlap.
#include <cstdint>

#include "ops/context.h"
#include "core/dtype.h"

namespace sublet::ops {

// splitmix64's output for position `counter` of the stream started at `seed`.
constexpr std::uint64_t splitmix64_at(std::uint64_t seed, std::uint64_t counter) {
  std::uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform double in [0, 1) from the top 53 bits: keeps with probability exactly 1 - p.
constexpr bool dropout_keeps(std::uint64_t seed, std::uint64_t counter, double p) {
  return static_cast<double>(splitmix64_at(seed, counter) >> 11) * 0x1.0p-53 >= p;
}

// output[i] = keep(i) ? input[i] / (1 - p) : 0, p in [0, 1] (p = 1 drops everything).
void dropout_forward(const Context& ctx, std::int64_t numel, DType dtype, const void* input,
                     double p, std::uint64_t seed, std::uint64_t offset, void* output);
// grad_input[i] = keep(i) ? grad_output[i] / (1 - p) : 0, with the forward's seed and offset.
void dropout_backward(const Context& ctx, std::int64_t numel, DType dtype, const void* grad_output,
                      double p, std::uint64_t seed, std::uint64_t offset, void* grad_input);

}  // namespace sublet::ops
