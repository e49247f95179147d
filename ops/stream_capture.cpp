#include "ops/stream_capture.h"

#include "ops/device_services.h"

namespace sublet::ops {

// A device type without the service (the CPU, or CUDA when not built in) never captures.
bool stream_is_capturing(const Context& ctx) {
  const auto is_capturing = device_services(ctx.device.type).stream_is_capturing;
  return is_capturing != nullptr && is_capturing(ctx);
}

}  // namespace sublet::ops
