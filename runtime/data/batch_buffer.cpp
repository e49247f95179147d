#include "runtime/data/batch_buffer.h"

#include <utility>

namespace sublet::data {

BatchBuffer::BatchBuffer(float* data, std::size_t size, Release release)
    : data_(data), size_(size), release_(std::move(release)) {}

BatchBuffer::BatchBuffer(BatchBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      release_(std::move(other.release_)) {}

BatchBuffer& BatchBuffer::operator=(BatchBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    release_ = std::move(other.release_);
  }
  return *this;
}

BatchBuffer::~BatchBuffer() { reset(); }

void BatchBuffer::reset() {
  if (data_ != nullptr && release_) release_(data_);
  data_ = nullptr;
  size_ = 0;
}

BatchBuffer allocate_host_batch_buffer(std::size_t size) {
  // Default-initialised: the loader overwrites every element, so zeroing would be wasted work.
  return BatchBuffer(new float[size], size, [](float* data) { delete[] data; });
}

}  // namespace sublet::data
