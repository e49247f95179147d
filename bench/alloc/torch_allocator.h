#pragma once
// PyTorch's CUDA caching allocator through its C++ entry points
// (c10::cuda::CUDACachingAllocator::raw_alloc/raw_delete): part of the torch plugin
// (torch_plugin.h, C++17), compiled only when its PyTorch has CUDA
// (SUBLET_TORCH_PLUGIN_WITH_CUDA). The allocator is a process-wide singleton: each instance
// empties its cache and resets its peak statistics on construction so that each row starts
// clean, and counts device allocations from the statistics' num_device_alloc.
// Leave PYTORCH_CUDA_ALLOC_CONF unset (or without backend:cudaMallocAsync) to measure the
// native caching allocator; description() says which backend answered.
#include <string>

#include "bench/alloc/allocator_under_test.h"

namespace sublet::bench {

class TorchCachingAllocatorUnderTest final : public AllocatorUnderTest {
 public:
  explicit TorchCachingAllocatorUnderTest(int device_index);
  ~TorchCachingAllocatorUnderTest() override;
  AllocationHandle allocate(std::size_t bytes) override;
  void free(AllocationHandle handle) override;
  std::optional<std::uint64_t> peak_reserved_bytes() const override;
  std::optional<std::uint64_t> driver_allocation_calls() const override;

  // "PyTorch <version> CUDACachingAllocator (<backend name>)".
  static std::string description();

 private:
  int device_index_;
  std::int64_t device_allocs_at_start_ = 0;
};

}  // namespace sublet::bench
