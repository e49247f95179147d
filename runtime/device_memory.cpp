#include "runtime/device_memory.h"

#include "memory/registry.h"

namespace sublet {

void synchronize(Device device) {
  // The allocator's backend owns the device's streams and events (memory/backend.h).
  if (auto* events = memory::allocator_for(device).backend().stream_events()) events->synchronize_device();
}

}  // namespace sublet
