#include "bench/alloc/caching_allocators.h"

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "core/format_bytes.h"

namespace sublet::bench {

CachingAllocatorUnderTest::CachingAllocatorUnderTest(std::unique_ptr<memory::Backend> backend,
                                                     memory::AllocatorConfig config)
    : allocator_(std::move(backend), config) {}

AllocationHandle CachingAllocatorUnderTest::allocate(std::size_t bytes) {
  return allocator_.allocate(bytes);
}

void CachingAllocatorUnderTest::free(AllocationHandle handle) {
  allocator_.free(static_cast<memory::Block*>(handle));
}

std::optional<std::uint64_t> CachingAllocatorUnderTest::peak_reserved_bytes() const {
  return allocator_.max_memory_reserved();
}

std::optional<std::uint64_t> CachingAllocatorUnderTest::driver_allocation_calls() const {
  return static_cast<std::uint64_t>(allocator_.stats().num_device_alloc);
}

UncachedBackendUnderTest::UncachedBackendUnderTest(std::unique_ptr<memory::Backend> backend)
    : backend_(std::move(backend)) {}

UncachedBackendUnderTest::~UncachedBackendUnderTest() {
  for (const auto& [ptr, bytes] : sizes_) backend_->deallocate(ptr, bytes);
}

AllocationHandle UncachedBackendUnderTest::allocate(std::size_t bytes) {
  ++calls_;
  void* ptr = backend_->allocate(bytes);
  if (!ptr)
    throw OutOfMemoryError(backend_->name() + " backend (uncached): could not allocate " +
                           sublet::format_bytes(static_cast<std::int64_t>(bytes)) + " with " +
                           sublet::format_bytes(static_cast<std::int64_t>(live_bytes_)) + " live");
  sizes_.emplace(ptr, bytes);
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return ptr;
}

void UncachedBackendUnderTest::free(AllocationHandle handle) {
  auto it = sizes_.find(handle);
  if (it == sizes_.end()) throw Error("uncached backend: free of a pointer it did not hand out");
  backend_->deallocate(handle, it->second);
  live_bytes_ -= it->second;
  sizes_.erase(it);
}

}  // namespace sublet::bench
