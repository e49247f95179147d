#pragma once
// The driver's own stream-ordered allocator as a backend: cudaMallocAsync/cudaFreeAsync on the
// device's current stream, from the default memory pool with its release threshold raised so
// the driver keeps freed memory cached. Used with AllocatorConfig::caching = false to compare
// sublet's cache against the driver's (sublet bench step --allocator async).
#include "memory/cuda_backend.h"

namespace sublet::memory {

class CudaAsyncBackend final : public CudaBackend {
 public:
  explicit CudaAsyncBackend(int device_index);
  std::string name() const override { return "cuda-async"; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  VirtualMemory* virtual_memory() override { return nullptr; }
};

}  // namespace sublet::memory
