#include "ops/concurrent.h"

#include "ops/device_services.h"
#include "core/tuning.h"
#include "ops/stream_capture.h"

namespace sublet::ops::detail {

bool overlaps_streams(const Context& ctx) {
  const DeviceServices& services = device_services(ctx.device.type);
  return services.fork_stream != nullptr && services.join_stream != nullptr && tuning().stream_overlap &&
         stream_is_capturing(ctx);
}

StreamHandle fork_stream(const Context& ctx, SideLane lane) {
  return device_services(ctx.device.type).fork_stream(ctx, static_cast<int>(lane));
}

void join_stream(const Context& ctx, SideLane lane) {
  device_services(ctx.device.type).join_stream(ctx, static_cast<int>(lane));
}

}  // namespace sublet::ops::detail
