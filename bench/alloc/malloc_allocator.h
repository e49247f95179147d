#pragma once
// malloc/free: the CPU baseline. glibc's own arena and mmap use is not observable per call
// without adding to the timed path, so peak reserved is not reported; every malloc counts as
// one call into the system allocator.
#include "bench/alloc/allocator_under_test.h"

namespace sublet::bench {

class MallocUnderTest final : public AllocatorUnderTest {
 public:
  AllocationHandle allocate(std::size_t bytes) override;
  void free(AllocationHandle handle) override;
  std::optional<std::uint64_t> peak_reserved_bytes() const override { return std::nullopt; }
  std::optional<std::uint64_t> driver_allocation_calls() const override { return calls_; }

 private:
  std::uint64_t calls_ = 0;
};

}  // namespace sublet::bench
