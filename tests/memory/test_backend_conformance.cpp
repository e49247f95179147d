// One conformance suite for every memory::Backend, as RMM runs one suite per memory resource:
// the contract written in memory/backend.h (aligned, non-overlapping allocations of at least the
// size; an impossible request answered with nullptr, never an exception or a crash; deallocate
// takes what allocate gave; the optional virtual-memory and stream-event capabilities behave),
// checked on each backend through the interface alone. A new backend adds one factory below.
// The CUDA backends skip without a GPU and are checked on the GPU machine.
#include <gtest/gtest.h>

#include "tests/gpu_skip.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "memory/backend.h"
#include "memory/caching_allocator.h"
#include "memory/fault_injecting_backend.h"
#include "memory/host_backend.h"
#include "memory/registry.h"
#include "memory/simulated_backend.h"

#ifdef SUBLET_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "memory/cuda_async_backend.h"
#include "memory/cuda_backend.h"
#include "memory/cuda_check.h"
#include "memory/pinned_host_backend.h"
#endif

namespace sublet::memory {
namespace {

constexpr std::size_t kSimulatedCapacity = 64 * kMiB;

// Reads and writes the bytes of a backend that gives real memory (host or device).
struct MemoryAccess {
  std::function<void(void* ptr, std::size_t bytes, unsigned char value)> fill;
  std::function<unsigned char(const void* ptr, std::size_t offset)> read_byte;
};

struct BackendCase {
  std::string label;  // the test name's suffix
  std::string expected_name;
  Device expected_device;
  bool needs_gpu = false;
  std::function<std::unique_ptr<Backend>()> make;  // nullptr: not built in (a CUDA backend without CUDA)
  std::optional<MemoryAccess> access;              // empty: fake addresses, nothing to touch
  std::optional<std::size_t> capacity;             // set for a device of a fixed, known capacity
  std::size_t impossible_bytes = 0;                // a request the device can never serve
};

// gtest prints a failing case's parameter: its label, not the struct's bytes.
void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.label; }

MemoryAccess host_access() {
  return {[](void* ptr, std::size_t bytes, unsigned char value) { std::memset(ptr, value, bytes); },
          [](const void* ptr, std::size_t offset) { return static_cast<const unsigned char*>(ptr)[offset]; }};
}

#ifdef SUBLET_HAVE_CUDA
MemoryAccess device_access() {
  return {[](void* ptr, std::size_t bytes, unsigned char value) {
            SUBLET_CUDA_CHECK(cudaMemset(ptr, value, bytes));
            SUBLET_CUDA_CHECK(cudaDeviceSynchronize());  // the async backend's memset runs on a stream
          },
          [](const void* ptr, std::size_t offset) {
            unsigned char byte = 0;
            SUBLET_CUDA_CHECK(cudaMemcpy(&byte, static_cast<const unsigned char*>(ptr) + offset, 1, cudaMemcpyDeviceToHost));
            return byte;
          }};
}
#endif

// Only real backends get SIZE_MAX / 2 (no machine has 8 EiB); the simulated ones their capacity + 1.
constexpr std::size_t kImpossibleForRealMemory = SIZE_MAX / 2;

std::vector<BackendCase> all_backends() {
  std::vector<BackendCase> cases;
  cases.push_back({"Host", "host", Device::cpu(), false, [] { return std::make_unique<HostBackend>(); },
                   host_access(), std::nullopt, kImpossibleForRealMemory});
  cases.push_back({"Simulated", "simulated", Device::cuda(0), false,
                   [] { return std::make_unique<SimulatedBackend>(kSimulatedCapacity); }, std::nullopt,
                   kSimulatedCapacity, kSimulatedCapacity + 1});
  cases.push_back({"FaultInjectingOverHost", "fault-injecting(host)", Device::cpu(), false,
                   [] { return std::make_unique<FaultInjectingBackend>(std::make_unique<HostBackend>()); },
                   host_access(), std::nullopt, kImpossibleForRealMemory});
  cases.push_back({"FaultInjectingOverSimulated", "fault-injecting(simulated)", Device::cuda(0), false,
                   [] {
                     return std::make_unique<FaultInjectingBackend>(std::make_unique<SimulatedBackend>(kSimulatedCapacity));
                   },
                   std::nullopt, kSimulatedCapacity, kSimulatedCapacity + 1});
#ifdef SUBLET_HAVE_CUDA
  cases.push_back({"Cuda", "cuda", Device::cuda(0), true, [] { return std::make_unique<CudaBackend>(0); },
                   device_access(), std::nullopt, kImpossibleForRealMemory});
  cases.push_back({"CudaAsync", "cuda-async", Device::cuda(0), true,
                   [] { return std::make_unique<CudaAsyncBackend>(0); }, device_access(), std::nullopt,
                   kImpossibleForRealMemory});
  cases.push_back({"PinnedHost", "pinned-host", Device::cpu(), true,
                   [] { return std::make_unique<PinnedHostBackend>(); }, host_access(), std::nullopt,
                   kImpossibleForRealMemory});
#else
  for (const char* label : {"Cuda", "CudaAsync", "PinnedHost"})
    cases.push_back({label, "", Device::cuda(0), true, nullptr, std::nullopt, std::nullopt, 0});
#endif
  return cases;
}

class BackendConformance : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    const BackendCase& c = GetParam();
    if (!c.make) GTEST_SKIP() << "sublet is built without CUDA: the " << c.label << " backend is not compiled in";
    if (c.needs_gpu) SUBLET_SKIP_WITHOUT_GPU("the " << c.label << " backend is checked on the GPU machine");
    backend_ = c.make();
  }
  void TearDown() override {
    for (auto [ptr, bytes] : live_) backend_->deallocate(ptr, bytes);
  }

  // Allocates and remembers the allocation, so that a failing assertion does not leak it.
  void* allocate(std::size_t bytes) {
    void* ptr = backend_->allocate(bytes);
    if (ptr) live_.emplace_back(ptr, bytes);
    return ptr;
  }
  void deallocate(void* ptr) {
    auto it = std::find_if(live_.begin(), live_.end(), [&](const auto& a) { return a.first == ptr; });
    ASSERT_NE(it, live_.end()) << "test bug: freeing what this test did not allocate";
    const std::size_t bytes = it->second;
    live_.erase(it);
    backend_->deallocate(ptr, bytes);
  }
  bool is_aligned(const void* ptr, std::size_t alignment = kBackendAlignment) const {
    return reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0;
  }

  std::unique_ptr<Backend> backend_;
  std::vector<std::pair<void*, std::size_t>> live_;
};

TEST_P(BackendConformance, NamesItselfAndItsDevice) {
  const BackendCase& c = GetParam();
  EXPECT_EQ(backend_->name(), c.expected_name);
  EXPECT_EQ(backend_->device(), c.expected_device);
  const MemoryInfo info = backend_->memory_info();
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_LE(info.free_bytes, info.total_bytes);
  if (c.capacity) {
    EXPECT_EQ(info.total_bytes, *c.capacity);
    EXPECT_EQ(info.free_bytes, *c.capacity) << "a fresh fixed-capacity device is empty";
  }
}

TEST_P(BackendConformance, AllocationsAreAlignedAndHoldAtLeastTheSize) {
  const BackendCase& c = GetParam();
  for (std::size_t bytes : {std::size_t{1}, std::size_t{255}, std::size_t{4097}, 2 * kMiB, 3 * kMiB + 17}) {
    void* ptr = allocate(bytes);
    ASSERT_NE(ptr, nullptr) << bytes << " bytes";
    EXPECT_TRUE(is_aligned(ptr)) << bytes << " bytes at " << ptr << ", not a multiple of " << kBackendAlignment;
    if (c.access) {
      c.access->fill(ptr, bytes, 0xa5);  // would fault (or the CUDA call fail) beyond the allocation
      EXPECT_EQ(c.access->read_byte(ptr, 0), 0xa5);
      EXPECT_EQ(c.access->read_byte(ptr, bytes - 1), 0xa5) << bytes << " bytes";
    }
  }
}

TEST_P(BackendConformance, LiveAllocationsDoNotOverlap) {
  const BackendCase& c = GetParam();
  std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
  for (std::size_t i = 1; i <= 12; ++i) {
    const std::size_t bytes = i * 4096 + (i % 3) * 100;
    void* ptr = allocate(bytes);
    ASSERT_NE(ptr, nullptr) << bytes << " bytes";
    ranges.emplace_back(reinterpret_cast<std::uintptr_t>(ptr), bytes);
    if (c.access) c.access->fill(ptr, bytes, static_cast<unsigned char>(i));
  }
  if (c.access) {  // each still holds its own pattern at both ends: no neighbour wrote over it
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const auto* ptr = reinterpret_cast<const void*>(ranges[i].first);
      EXPECT_EQ(c.access->read_byte(ptr, 0), i + 1);
      EXPECT_EQ(c.access->read_byte(ptr, ranges[i].second - 1), i + 1);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    EXPECT_LE(ranges[i - 1].first + ranges[i - 1].second, ranges[i].first)
        << "allocation of " << ranges[i - 1].second << " bytes runs into the next one";
}

TEST_P(BackendConformance, DeallocateTakesWhatAllocateGaveInAnyOrder) {
  std::vector<void*> ptrs;
  for (std::size_t i = 0; i < 6; ++i) {
    ptrs.push_back(allocate((i + 1) * 64 * 1024));
    ASSERT_NE(ptrs.back(), nullptr);
  }
  for (std::size_t i : {3u, 0u, 5u, 1u, 4u, 2u}) ASSERT_NO_THROW(deallocate(ptrs[i]));
  for (std::size_t i = 0; i < 6; ++i) EXPECT_NE(allocate((i + 1) * 64 * 1024), nullptr) << "after freeing all";
}

TEST_P(BackendConformance, ImpossibleRequestReturnsNullAndLeavesTheBackendUsable) {
  const BackendCase& c = GetParam();
  void* ptr = reinterpret_cast<void*>(1);
  EXPECT_NO_THROW(ptr = allocate(c.impossible_bytes)) << c.impossible_bytes << " bytes";
  EXPECT_EQ(ptr, nullptr) << "out-of-memory is answered with nullptr (memory/backend.h)";
  void* after = allocate(4096);
  EXPECT_NE(after, nullptr) << "a failed request must not leave the backend (or the driver's error state) broken";
  if (after && c.access) {
    c.access->fill(after, 4096, 0x3c);
    EXPECT_EQ(c.access->read_byte(after, 4095), 0x3c);
  }
}

TEST_P(BackendConformance, FixedCapacityIsExactAndFreedBytesComeBack) {
  const BackendCase& c = GetParam();
  if (!c.capacity) GTEST_SKIP() << c.label << " has no fixed capacity to fill";
  void* all = allocate(*c.capacity);
  ASSERT_NE(all, nullptr) << "the whole capacity in one request";
  EXPECT_EQ(backend_->memory_info().free_bytes, 0u);
  EXPECT_EQ(allocate(1), nullptr) << "one byte more than the capacity";
  deallocate(all);
  EXPECT_EQ(backend_->memory_info().free_bytes, *c.capacity);
  EXPECT_NE(allocate(*c.capacity), nullptr) << "the freed capacity again";
}

TEST_P(BackendConformance, VirtualMemoryReservesMapsAndUnmaps) {
  const BackendCase& c = GetParam();
  VirtualMemory* vm = backend_->virtual_memory();
  if (!vm) {  // then the allocator must refuse expandable segments over it, and say so
    EXPECT_THROW(CachingAllocator(c.make(), AllocatorConfig::parse("expandable_segments:True")), ConfigError);
    return;
  }
  const std::size_t granularity = vm->granularity();
  ASSERT_GT(granularity, 0u);
  EXPECT_EQ(granularity % kBackendAlignment, 0u);
  void* base = vm->reserve(4 * granularity);
  ASSERT_NE(base, nullptr);
  EXPECT_TRUE(is_aligned(base));
  ASSERT_TRUE(vm->map(base, 2 * granularity));
  if (c.access) {
    c.access->fill(base, 2 * granularity, 0x7e);
    EXPECT_EQ(c.access->read_byte(base, 2 * granularity - 1), 0x7e);
  }
  if (c.capacity) {
    const std::size_t beyond = (*c.capacity / granularity + 1) * granularity;
    void* far = vm->reserve(beyond);
    ASSERT_NE(far, nullptr) << "reserving addresses costs no capacity";
    bool mapped = true;
    EXPECT_NO_THROW(mapped = vm->map(far, beyond));
    EXPECT_FALSE(mapped) << "mapping more than the capacity is a false, not an exception";
    vm->release(far, beyond);
  }
  vm->unmap(base, 2 * granularity);
  vm->release(base, 4 * granularity);
}

TEST_P(BackendConformance, StreamEventsCompleteOnceTheDeviceIsSynchronized) {
  const BackendCase& c = GetParam();
  StreamEvents* events = backend_->stream_events();
  if (!events) GTEST_SKIP() << c.label << " offers no stream events (blocks are reusable when freed)";
  const EventHandle event = events->record(nullptr);
  events->synchronize_device();
  EXPECT_TRUE(events->completed(event)) << "an event recorded before synchronize_device()";
  events->destroy(event);
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, BackendConformance, ::testing::ValuesIn(all_backends()),
                         [](const ::testing::TestParamInfo<BackendCase>& info) { return info.param.label; });

}  // namespace
}  // namespace sublet::memory
