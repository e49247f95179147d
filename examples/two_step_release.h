#pragma once
#include <iosfwd>

#include "core/device.h"

namespace sublet::examples {

// Shows the caching allocator's two-step release on `device`: allocate a buffer, free it
// (allocated drops, reserved stays), allocate again (served from the cache, no device call),
// free it, empty_cache() (reserved drops), then memory_summary(). Returns 0 on success.
int two_step_release_demo(Device device, std::size_t buffer_bytes, std::ostream& out);

}  // namespace sublet::examples
