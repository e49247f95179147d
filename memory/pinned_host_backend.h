#pragma once
// Pinned (page-locked) host memory as a backend: cudaHostAlloc/cudaFreeHost for segments, CUDA
// events for stream-ordered reuse. A host-to-device copy from pinned memory is a DMA that runs
// asynchronously on a stream; from pageable memory the driver stages it and the caller waits.
// cudaHostAlloc maps and locks pages and synchronises, so it belongs behind a caching allocator
// (memory/pinned_host.h), whose statistics then count the pinned bytes like every other byte.
//
// The memory serves every device (with unified addressing, cudaHostAlloc memory is pinned for
// all of them), so device() is the CPU, where the bytes live. Stream events: a block read by an
// async copy must not be handed out again before the copy has finished. The allocator records
// an event on each stream the block was used on (record_stream) when the block is freed; an
// event must be created on the stream's device, which record() asks the stream for. For the
// legacy default stream (nullptr) that is the current device: free such a block with the
// copying device current.
#include <mutex>
#include <set>

#include "memory/backend.h"

namespace sublet::memory {

class PinnedHostBackend final : public Backend, public StreamEvents {
 public:
  std::string name() const override { return "pinned-host"; }
  Device device() const override { return Device::cpu(); }
  // nullptr when the host cannot pin that many bytes; other driver failures throw CudaError.
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  // The host's memory, as HostBackend reports it (pinned memory is host memory).
  MemoryInfo memory_info() const override;
  StreamEvents* stream_events() override { return this; }

  EventHandle record(StreamHandle stream) override;
  bool completed(EventHandle event) override;
  void destroy(EventHandle event) override;
  // Pinned blocks may be read by copies on any device: waits for every device an event was
  // recorded on (not all devices: that would create a context on GPUs this process never used).
  void synchronize_device() override;

 private:
  std::mutex devices_mutex_;
  std::set<int> devices_with_events_;
};

}  // namespace sublet::memory
