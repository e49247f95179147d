#pragma once
// Real GPU memory: cudaMalloc/cudaFree for segments; the driver's virtual memory API for
// expandable segments (reserve an address range, create and map physical chunks as the
// segment grows, unmap them on empty_cache); CUDA events for stream-ordered reuse.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "memory/backend.h"

namespace sublet::memory {

class CudaBackend : public Backend, public VirtualMemory, public StreamEvents {
 public:
  explicit CudaBackend(int device_index);
  ~CudaBackend() override;
  // Usable CUDA devices; 0 when there is no driver or no device; CudaError for a broken GPU host.
  static int device_count();
  // What a cudaGetDeviceCount result means: the count, 0 for "no GPU here" (no device, no
  // driver), or a CudaError for a GPU host that is broken.
  static int device_count_from(cudaError_t status, int count);

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::cuda(device_index_); }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  MemoryInfo memory_info() const override;
  VirtualMemory* virtual_memory() override { return this; }
  StreamEvents* stream_events() override { return this; }

  std::size_t granularity() const override { return granularity_; }
  void* reserve(std::size_t bytes) override;
  void release(void* base, std::size_t bytes) override;
  bool map(void* address, std::size_t bytes) override;
  void unmap(void* address, std::size_t bytes) override;

  EventHandle record(StreamHandle stream) override;
  bool completed(EventHandle event) override;
  void destroy(EventHandle event) override;
  void synchronize_device() override;
  bool can_make_stream_wait() const override { return true; }
  void make_stream_wait(StreamHandle stream, EventHandle event) override;

 private:
  void unmap_chunks(CUdeviceptr begin, CUdeviceptr end);

  int device_index_;
  std::size_t granularity_ = 2 * 1024 * 1024;
  std::mutex handles_mutex_;
  std::map<CUdeviceptr, CUmemGenericAllocationHandle> handles_;  // one physical chunk per granule
};

}  // namespace sublet::memory
