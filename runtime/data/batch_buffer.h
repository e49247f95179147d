#pragma once
// The float storage of one batch's images, behind a tiny interface so that GPU training can
// plug in pinned (page-locked) host memory for asynchronous host-to-device copies without the
// loader knowing: an allocator returns a buffer together with the function that releases it.
#include <cstddef>
#include <functional>
#include <span>

namespace sublet::data {

class BatchBuffer {
 public:
  using Release = std::function<void(float*)>;

  BatchBuffer() = default;
  // Takes ownership of `size` floats at `data`; `release(data)` runs when the buffer dies.
  BatchBuffer(float* data, std::size_t size, Release release);
  BatchBuffer(BatchBuffer&& other) noexcept;
  BatchBuffer& operator=(BatchBuffer&& other) noexcept;
  BatchBuffer(const BatchBuffer&) = delete;
  BatchBuffer& operator=(const BatchBuffer&) = delete;
  ~BatchBuffer();

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<float> span() { return {data_, size_}; }
  std::span<const float> span() const { return {data_, size_}; }

 private:
  void reset();

  float* data_ = nullptr;
  std::size_t size_ = 0;
  Release release_;
};

// Returns a buffer of at least `size` floats (contents unspecified). The loader calls it from
// its background thread, so an allocator must be thread-safe.
using BatchBufferAllocator = std::function<BatchBuffer(std::size_t size)>;

// The default allocator: ordinary (pageable) host memory.
BatchBuffer allocate_host_batch_buffer(std::size_t size);

}  // namespace sublet::data
