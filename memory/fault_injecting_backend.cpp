#include "memory/fault_injecting_backend.h"

#include <algorithm>

#include "core/errors.h"

namespace sublet::memory {

FaultInjectingBackend::FaultInjectingBackend(std::unique_ptr<Backend> wrapped) : wrapped_(std::move(wrapped)) {
  if (!wrapped_) throw Error("FaultInjectingBackend: no backend to wrap");
}

bool FaultInjectingBackend::should_fail_request(std::size_t bytes) {
  ++allocate_calls_;
  largest_request_ = std::max(largest_request_, bytes);
  if (fail_at_call_ != 0 && allocate_calls_ == fail_at_call_) {
    if (fault_ == Fault::DeviceFull) {
      full_ = true;
      capacity_ = held_;
    }
    ++failed_calls_;
    return true;
  }
  if (full_ && held_ + bytes > capacity_) {
    ++failed_calls_;
    return true;
  }
  return false;
}

void* FaultInjectingBackend::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (should_fail_request(bytes)) return nullptr;
  void* ptr = wrapped_->allocate(bytes);
  if (ptr) held_ += bytes;
  return ptr;
}

void FaultInjectingBackend::deallocate(void* ptr, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  wrapped_->deallocate(ptr, bytes);
  held_ -= bytes;
}

bool FaultInjectingBackend::map(void* address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (should_fail_request(bytes)) return false;
  const bool mapped = wrapped_->virtual_memory()->map(address, bytes);
  if (mapped) held_ += bytes;
  return mapped;
}

void FaultInjectingBackend::unmap(void* address, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  wrapped_->virtual_memory()->unmap(address, bytes);
  held_ -= bytes;
}

MemoryInfo FaultInjectingBackend::memory_info() const {
  MemoryInfo info = wrapped_->memory_info();
  std::lock_guard lock(mutex_);
  if (full_) info.free_bytes = std::min(info.free_bytes, capacity_ > held_ ? capacity_ - held_ : 0);
  return info;
}

void FaultInjectingBackend::fail_nth_request(std::uint64_t n, Fault fault) {
  std::lock_guard lock(mutex_);
  fail_at_call_ = n == 0 ? 0 : allocate_calls_ + n;
  fault_ = fault;
  full_ = false;
}

std::size_t FaultInjectingBackend::largest_request() const {
  std::lock_guard lock(mutex_);
  return largest_request_;
}

void FaultInjectingBackend::reset_largest_request() {
  std::lock_guard lock(mutex_);
  largest_request_ = 0;
}

std::uint64_t FaultInjectingBackend::allocate_calls() const { std::lock_guard lock(mutex_); return allocate_calls_; }
std::uint64_t FaultInjectingBackend::failed_calls() const { std::lock_guard lock(mutex_); return failed_calls_; }
std::size_t FaultInjectingBackend::held_bytes() const { std::lock_guard lock(mutex_); return held_; }

}  // namespace sublet::memory
