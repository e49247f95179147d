#pragma once
// Makes ctx.device the current CUDA device for a scope and restores the previous one: every
// runtime call (launches, memcpy, handle creation) acts on the current device, and a kernel
// must run on the device that owns its operands and stream.
#include <cuda_runtime_api.h>

#include "memory/cuda_check.h"
#include "core/device.h"

namespace sublet::ops::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(Device device) {
    SUBLET_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device.index) SUBLET_CUDA_CHECK(cudaSetDevice(device.index));
    changed_ = previous_ != device.index;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);  // no throw from a destructor; nothing to recover
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

inline cudaStream_t stream_of(StreamHandle stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace sublet::ops::cuda
