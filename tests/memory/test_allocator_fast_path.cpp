// A cache hit must make no backend call and no heap allocation: count both around hot loops.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "alloc_test_support.h"

namespace {
std::atomic<long> heap_allocations{0};
}  // namespace

// Counting global operator new for this test binary only.
void* operator new(std::size_t size) {
  heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;

TEST(FastPath, CacheHitsAllocateNothingAndCallNoBackend) {
  SimulatedAllocator a(std::size_t{4} << 30);
  // Warm up: every size once, so that segments exist and the Block arena has grown.
  const std::size_t sizes[] = {512, 4096, 1 << 20, 8 << 20, 64 << 20, 256 << 20};
  for (std::size_t size : sizes) a.allocator.free(a.allocator.allocate(size));
  Block* live[16];
  for (auto& b : live) b = a.allocator.allocate(3000);
  for (auto* b : live) a.allocator.free(b);

  const auto backend_calls = a.backend->allocate_calls();
  const long heap_before = heap_allocations.load();
  for (int round = 0; round < 1000; ++round) {
    for (std::size_t size : sizes) a.allocator.free(a.allocator.allocate(size));
    for (auto& b : live) b = a.allocator.allocate(3000);  // splits a cached block each time
    for (auto* b : live) a.allocator.free(b);
  }
  EXPECT_EQ(heap_allocations.load() - heap_before, 0);
  EXPECT_EQ(a.backend->allocate_calls(), backend_calls);
}
