#pragma once
// Finds the first int64 value outside [0, limit) in a strided device array. Used before the
// kernels that index with device-resident integers (gather, scatter_add, the losses' targets),
// so that a bad index throws ValueError on the host, with the same message as the CPU kernel,
// instead of reading or writing out of bounds on the device. It waits for the stream: the
// check is exact, and its cost is one small copy back per call. While the stream captures a
// CUDA graph the check is skipped (returns nullopt): nothing has run yet to be checked.
#include <cstdint>
#include <optional>

#include "ops/context.h"
#include "ops/strided.h"

namespace sublet::ops::cuda {

struct OutOfRange {
  std::int64_t position = 0;  // row-major position in `sizes`
  std::int64_t value = 0;
};

// `allowed`, when given, is one more value that passes (the losses' ignore_index).
std::optional<OutOfRange> find_out_of_range(const Context& ctx, const std::int64_t* values, const Shape& sizes,
                                            const Shape& strides, std::int64_t limit,
                                            std::optional<std::int64_t> allowed = std::nullopt);

}  // namespace sublet::ops::cuda
