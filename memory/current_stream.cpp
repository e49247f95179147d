#include "memory/current_stream.h"

#include <string>
#include <vector>

#include "core/errors.h"

namespace sublet::memory {
namespace {

// Indexed by device index; grows on first use of a device by this thread.
std::vector<StreamHandle>& thread_streams() {
  thread_local std::vector<StreamHandle> streams;
  return streams;
}

void check_index(Device device) {
  if (device.index < 0) {
    throw DeviceError("current_stream: device index must be >= 0, got " + device.str());
  }
}

}  // namespace

StreamHandle current_stream(Device device) {
  if (device.is_cpu()) return nullptr;
  check_index(device);
  const auto& streams = thread_streams();
  const auto index = static_cast<std::size_t>(device.index);
  return index < streams.size() ? streams[index] : nullptr;
}

void set_current_stream(Device device, StreamHandle stream) {
  if (device.is_cpu()) {
    if (stream != nullptr) throw DeviceError("set_current_stream: the CPU has no streams, got a non-null stream");
    return;
  }
  check_index(device);
  auto& streams = thread_streams();
  const auto index = static_cast<std::size_t>(device.index);
  if (index >= streams.size()) streams.resize(index + 1, nullptr);
  streams[index] = stream;
}

}  // namespace sublet::memory
