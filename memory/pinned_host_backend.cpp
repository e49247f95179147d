#include "memory/pinned_host_backend.h"

#include <cuda_runtime_api.h>

#include <optional>

#include "memory/cuda_check.h"
#include "memory/cuda_events.h"
#include "memory/cuda_device_guard.h"
#include "memory/host_backend.h"

namespace sublet::memory {

void* PinnedHostBackend::allocate(std::size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t status = cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // out of memory is an answer, not an error: the allocator reports it
    return nullptr;
  }
  SUBLET_CUDA_CHECK(status);
  return ptr;
}

void PinnedHostBackend::deallocate(void* ptr, std::size_t /*bytes*/) { SUBLET_CUDA_CHECK(cudaFreeHost(ptr)); }

MemoryInfo PinnedHostBackend::memory_info() const { return HostBackend().memory_info(); }

EventHandle PinnedHostBackend::record(StreamHandle stream) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  // The default streams belong to the current device; any other stream knows its own, and the
  // event must be created on it for cudaEventRecord to accept the pair.
  int device = 0;
  std::optional<CudaDeviceGuard> guard;
  if (cuda_stream == nullptr || cuda_stream == cudaStreamLegacy || cuda_stream == cudaStreamPerThread) {
    SUBLET_CUDA_CHECK(cudaGetDevice(&device));
  } else {
    SUBLET_CUDA_CHECK(cudaStreamGetDevice(cuda_stream, &device));
    guard.emplace(device);
  }
  {
    std::lock_guard lock(devices_mutex_);
    devices_with_events_.insert(device);
  }
  cudaEvent_t event = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t status = cudaEventRecord(event, cuda_stream);
  if (status != cudaSuccess) {
    cudaEventDestroy(event);  // the record's error is the one to report
    SUBLET_CUDA_CHECK(status);
  }
  return event;
}

bool PinnedHostBackend::completed(EventHandle event) { return cuda_event_completed(event); }

void PinnedHostBackend::destroy(EventHandle event) { destroy_cuda_event(event); }

void PinnedHostBackend::synchronize_device() {
  std::set<int> devices;
  {
    std::lock_guard lock(devices_mutex_);
    devices = devices_with_events_;
  }
  for (int device : devices) {
    CudaDeviceGuard guard(device);
    SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace sublet::memory
