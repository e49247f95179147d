#pragma once
// The stream kernels of a device launch on when the caller names none: one per (thread,
// device), as torch.cuda.current_stream. Thread-local so that two threads driving the same GPU
// never see each other's choice; the default is nullptr, the legacy default stream, which
// orders itself against every blocking stream of the device.
// The CPU has no streams: current_stream(Device::cpu()) is always nullptr.
#include "core/device.h"

namespace sublet::memory {

StreamHandle current_stream(Device device);
// Throws DeviceError when asked to give the CPU a stream other than nullptr.
void set_current_stream(Device device, StreamHandle stream);

// Makes `stream` current for `device` for the guard's scope and restores the previous one.
class StreamGuard {
 public:
  StreamGuard(Device device, StreamHandle stream)
      : device_(device), previous_(current_stream(device)) {
    set_current_stream(device, stream);
  }
  ~StreamGuard() { set_current_stream(device_, previous_); }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  StreamHandle previous_;
};

}  // namespace sublet::memory
