#pragma once
// Whether work enqueued on ctx.stream is being recorded into a CUDA graph instead of running.
// Host-side checks that wait for the device (index bounds, .item()) must not run then: a
// synchronisation would invalidate the capture, and the values read would be stale anyway.
#include "ops/context.h"

namespace sublet::ops {

// False on the CPU and in builds without CUDA.
bool stream_is_capturing(const Context& ctx);

}  // namespace sublet::ops
