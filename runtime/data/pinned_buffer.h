#pragma once
// Pinned (page-locked) host memory for batches, for the data loader's BatchBufferAllocator slot
// (runtime/data/batch_buffer.h). From pinned memory a host-to-device copy is a DMA that runs
// asynchronously on a stream, so the next batch's upload overlaps the current step instead of
// stalling it as a pageable copy does. The bytes come from the process's pinned allocator
// (memory::pinned_allocator(), memory/pinned_host.h), so they show in its memory_stats() and
// memory_summary(); buffers are also kept on a small free list of this pool and reused, so that
// a batch of the usual size makes no allocator call. Compiled only with CUDA.
//
// Wiring (trainer): keep one PinnedBatchBuffers for the run; set
//   options.batch_buffer_allocator = pinned.allocator();      // train/train_options.h
// and upload each batch with pinned.copy_to_device_async(batch.images.data(), images.data_ptr(),
// images.nbytes(), device, memory::current_stream(device)) instead of ops::copy_bytes (which
// waits for the copy). The buffer is not handed out again until that copy has completed, so
// the loader may release the batch right after the call: this pool checks the copy's event
// before reusing a buffer from its free list, and a buffer it gives back to the pinned allocator
// goes back with the copy's stream recorded (record_stream), so the allocator, too, waits for
// the copy before handing the bytes to anyone else — without a host wait here.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"
#include "runtime/data/batch_buffer.h"

namespace sublet {

class PinnedBatchBuffers {
 public:
  // Keeps at most `max_cached` free buffers; more are returned to the pinned allocator.
  explicit PinnedBatchBuffers(std::size_t max_cached = 4);

  // Thread-safe (the loader calls it from its own thread). Buffers may outlive this object.
  data::BatchBuffer allocate(std::size_t floats);
  data::BatchBufferAllocator allocator();

  // Whether [src, src + bytes) lies inside a buffer this pool has lent out.
  bool owns(const float* src, std::size_t bytes) const;

  // Stream-ordered copy of `bytes` from `src` (inside a buffer of this pool) to device memory;
  // returns at once. The buffer is reused only after the copy has finished.
  void copy_to_device_async(const float* src, void* dst, std::size_t bytes, Device device, StreamHandle stream);

  // Buffers taken from the pinned allocator so far (a reused buffer from the free list is not
  // one). The allocator serves them from its cache when it can, so this bounds its cudaHostAlloc calls.
  std::int64_t host_allocations() const;
  std::size_t cached_buffers() const;     // free buffers on the list

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace sublet
