#pragma once
// Pinned (page-locked) host memory for batches, for the data loader's BatchBufferAllocator slot
// (runtime/data/batch_buffer.h). From pinned memory a host-to-device copy is a DMA that runs
// asynchronously on a stream, so the next batch's upload overlaps the current step instead of
// stalling it as a pageable copy does. cudaHostAlloc is slow (it maps and locks pages) and
// synchronises, so buffers are kept on a small free list and reused. Compiled only with CUDA.
//
// Wiring (trainer): keep one PinnedBatchBuffers for the run; set
//   options.batch_buffer_allocator = pinned.allocator();      // train/train_options.h
// and upload each batch with pinned.copy_to_device_async(batch.images.data(), images.data_ptr(),
// images.nbytes(), device, memory::current_stream(device)) instead of ops::copy_bytes (which
// waits for the copy). The buffer is not handed out again until that copy has completed, so
// the loader may release the batch right after the call.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"
#include "runtime/data/batch_buffer.h"

namespace sublet {

class PinnedBatchBuffers {
 public:
  // Keeps at most `max_cached` free buffers; more are returned to the driver.
  explicit PinnedBatchBuffers(std::size_t max_cached = 4);

  // Thread-safe (the loader calls it from its own thread). Buffers may outlive this object.
  data::BatchBuffer allocate(std::size_t floats);
  data::BatchBufferAllocator allocator();

  // Whether [src, src + bytes) lies inside a buffer this pool has lent out.
  bool owns(const float* src, std::size_t bytes) const;

  // Stream-ordered copy of `bytes` from `src` (inside a buffer of this pool) to device memory;
  // returns at once. The buffer is reused only after the copy has finished.
  void copy_to_device_async(const float* src, void* dst, std::size_t bytes, Device device, StreamHandle stream);

  std::int64_t host_allocations() const;  // cudaHostAlloc calls so far
  std::size_t cached_buffers() const;     // free buffers on the list

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace sublet
