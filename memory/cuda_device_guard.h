#pragma once
// The one device guard of the project (memory, ops and runtime all use it): makes a CUDA device
// current for a scope and restores the caller's afterwards. Every runtime call (cudaMalloc,
// launches, memcpy, stream/event/handle creation) acts on the current device, and the current
// device is per host thread, so code that works on "its" device must not leave another one
// current behind it. Like c10::cuda::CUDAGuard, it calls cudaSetDevice only when the device
// differs (setting it is not free, and most scopes already run on the right device).
#include <cuda_runtime_api.h>

#include "core/device.h"
#include "core/errors.h"
#include "memory/cuda_check.h"

namespace sublet::memory {

class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device_index) {
    SUBLET_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_index) {
      SUBLET_CUDA_CHECK(cudaSetDevice(device_index));
      changed_ = true;
    }
  }
  explicit CudaDeviceGuard(Device device) : CudaDeviceGuard(cuda_index(device)) {}

  ~CudaDeviceGuard() {
    if (!changed_) return;
    // A destructor must not throw (it may run during unwinding). If the caller's device cannot
    // be restored the device itself is broken: the next checked call reports that, and the check
    // has already cleared the error state, so it is dropped here.
    try {
      SUBLET_CUDA_CHECK(cudaSetDevice(previous_));
    } catch (...) {
    }
  }

  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard(CudaDeviceGuard&&) = delete;
  CudaDeviceGuard& operator=(CudaDeviceGuard&&) = delete;

  // The device that was current before the guard (and will be again after it).
  int previous_device() const { return previous_; }

 private:
  static int cuda_index(Device device) {
    if (!device.is_cuda()) throw DeviceError("CudaDeviceGuard: needs a CUDA device, got " + device.str());
    return device.index;
  }

  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace sublet::memory
