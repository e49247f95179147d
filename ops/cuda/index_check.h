#pragma once
// Checks that every int64 value of a strided device array lies in [0, limit). Used before the
// kernels that index with device-resident integers (gather, scatter_add, embedding ids, the
// losses' targets), so that a bad index throws ValueError on the host, with the same message as
// the CPU kernel, instead of reading or writing out of bounds on the device. Eagerly it waits for
// the stream: the check is exact, and its cost is one small copy back per call. While the stream
// captures a CUDA graph nothing has run yet: with an ops::CapturedIndexChecks installed
// (ops/captured_index_checks.h) the check is captured, so that every replay runs it and the host
// reads its verdict after the replay; without one it is skipped. The kernels that index stay
// within bounds for a bad index (they skip it or produce NaN), so a replay that meets one
// finishes and its check can report.
#include <cstdint>
#include <optional>

#include "ops/captured_index_checks.h"
#include "ops/context.h"
#include "ops/strided.h"

namespace sublet::ops::cuda {

// `allowed`, when given, is one more value that passes (the losses' ignore_index). `report` is
// called with the first bad position and value (and throws); captured, it is called after a
// replay, so it must own what it needs (capture by value).
void check_in_range(const Context& ctx, const std::int64_t* values, const Shape& sizes, const Shape& strides,
                    std::int64_t limit, std::optional<std::int64_t> allowed, const OutOfRangeReport& report);

}  // namespace sublet::ops::cuda
