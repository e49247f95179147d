#pragma once
// sublet's caching allocator under test, over any backend (CudaBackend, HostBackend,
// SimulatedBackend), and the same backend with no cache in front of it (every request goes
// to the landlord: the baseline the cache has to beat).
#include <memory>
#include <unordered_map>

#include "bench/alloc/allocator_under_test.h"
#include "memory/backend.h"
#include "memory/caching_allocator.h"
#include "memory/config.h"

namespace sublet::bench {

class CachingAllocatorUnderTest final : public AllocatorUnderTest {
 public:
  CachingAllocatorUnderTest(std::unique_ptr<memory::Backend> backend, memory::AllocatorConfig config);
  AllocationHandle allocate(std::size_t bytes) override;
  void free(AllocationHandle handle) override;
  std::optional<std::uint64_t> peak_reserved_bytes() const override;
  std::optional<std::uint64_t> driver_allocation_calls() const override;

 private:
  memory::CachingAllocator allocator_;
};

// Backend::deallocate needs the size back, so the handle's size is kept in a map here: a driver
// keeps the same bookkeeping on its side, so this is part of the uncached cost, not overhead.
class UncachedBackendUnderTest final : public AllocatorUnderTest {
 public:
  explicit UncachedBackendUnderTest(std::unique_ptr<memory::Backend> backend);
  ~UncachedBackendUnderTest() override;
  AllocationHandle allocate(std::size_t bytes) override;
  void free(AllocationHandle handle) override;
  std::optional<std::uint64_t> peak_reserved_bytes() const override { return peak_bytes_; }
  std::optional<std::uint64_t> driver_allocation_calls() const override { return calls_; }

 private:
  std::unique_ptr<memory::Backend> backend_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::uint64_t live_bytes_ = 0;
  std::uint64_t peak_bytes_ = 0;
  std::uint64_t calls_ = 0;
};

}  // namespace sublet::bench
