#include "bench/alloc/torch_allocator.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/version.h>

#include <exception>

#include "bench/alloc/torch_errors.h"

namespace sublet::bench {
namespace {

namespace torch_alloc = c10::cuda::CUDACachingAllocator;

constexpr auto kAllPools = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

}  // namespace

TorchCachingAllocatorUnderTest::TorchCachingAllocatorUnderTest(int device_index) : device_index_(device_index) {
  translate_c10_errors("allocator initialisation", [&] {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index_));
    torch_alloc::init(c10::cuda::device_count());  // idempotent; libtorch does it lazily otherwise
    torch_alloc::emptyCache();
    torch_alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device_index_));
    device_allocs_at_start_ = torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device_index_)).num_device_alloc;
  });
}

TorchCachingAllocatorUnderTest::~TorchCachingAllocatorUnderTest() {
  try {
    torch_alloc::emptyCache();
  } catch (const std::exception&) {
    // Destructors must not throw; the cache stays for the next row's constructor to empty.
  }
}

AllocationHandle TorchCachingAllocatorUnderTest::allocate(std::size_t bytes) {
  return translate_c10_errors("raw_alloc", [&] { return torch_alloc::raw_alloc(bytes); });
}

void TorchCachingAllocatorUnderTest::free(AllocationHandle handle) {
  translate_c10_errors("raw_delete", [&] { torch_alloc::raw_delete(handle); });
}

std::optional<std::uint64_t> TorchCachingAllocatorUnderTest::peak_reserved_bytes() const {
  const auto stats = torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device_index_));
  return static_cast<std::uint64_t>(stats.reserved_bytes[kAllPools].peak);
}

std::optional<std::uint64_t> TorchCachingAllocatorUnderTest::driver_allocation_calls() const {
  const auto stats = torch_alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device_index_));
  return static_cast<std::uint64_t>(stats.num_device_alloc - device_allocs_at_start_);
}

std::string TorchCachingAllocatorUnderTest::description() {
  return std::string("PyTorch ") + TORCH_VERSION + " CUDACachingAllocator (" + torch_alloc::name() +
         ") via raw_alloc/raw_delete";
}

}  // namespace sublet::bench
