#include "ops/profiler_range.h"

#include "ops/device_services.h"
#include "ops/kernel_table.h"

namespace sublet::ops {

// Every built backend that knows an external profiler starts and stops its range (CUDA's
// cudaProfilerStart/Stop); with none, both do nothing.
void profiler_range_start() {
  for (int type = 0; type < kNumDeviceTypes; ++type) {
    if (const auto start = device_services(static_cast<DeviceType>(type)).profiler_start) start();
  }
}

void profiler_range_stop() {
  for (int type = 0; type < kNumDeviceTypes; ++type) {
    if (const auto stop = device_services(static_cast<DeviceType>(type)).profiler_stop) stop();
  }
}

}  // namespace sublet::ops
