#include "ops/device_services.h"

#include <array>

#include "ops/kernel_table.h"

namespace sublet::ops {

namespace {
// Written only inside ensure_kernels_registered's std::call_once, which orders those writes
// before every read that follows it.
constinit std::array<DeviceServices, kNumDeviceTypes> services{};
}  // namespace

DeviceServices& mutable_device_services(DeviceType type) { return services[static_cast<std::size_t>(type)]; }

const DeviceServices& device_services(DeviceType type) {
  ensure_kernels_registered();
  return services[static_cast<std::size_t>(type)];
}

}  // namespace sublet::ops
