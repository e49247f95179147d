#pragma once
// One allocator as the allocation benchmark sees it: allocate bytes, free what it handed out,
// and say what it cost the layer below (peak reserved bytes, calls to the driver or system
// allocator). Every implementation is created fresh for each benchmark row, so its counters
// cover exactly that row (warm-up included).
// Part of the PyTorch plugin ABI (torch_plugin.h): C++17, nothing of sublet's included, and a
// change to a virtual function here means a new kTorchPluginAbiVersion.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace sublet::bench {

// Opaque to the benchmark: a device pointer, a host pointer or a sublet Block*.
using AllocationHandle = void*;

class AllocatorUnderTest {
 public:
  virtual ~AllocatorUnderTest() = default;
  // Never nullptr: throws sublet::Error (OutOfMemoryError, CudaError) on failure.
  virtual AllocationHandle allocate(std::size_t bytes) = 0;
  virtual void free(AllocationHandle handle) = 0;
  // Highest memory held from the layer below since construction; nullopt when not observable.
  virtual std::optional<std::uint64_t> peak_reserved_bytes() const = 0;
  // Allocation calls into the layer below (cudaMalloc, cuMemMap, malloc) since construction;
  // nullopt when not observable (cudaMallocAsync grows its pool inside the driver).
  virtual std::optional<std::uint64_t> driver_allocation_calls() const = 0;
};

}  // namespace sublet::bench
