// Private pools (CUDA graph capture) and the no-cache mode used as a benchmark baseline.
#include <gtest/gtest.h>

#include "alloc_test_support.h"
#include "allocator_invariants.h"
#include "core/errors.h"
#include "memory/registry.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;
using sublet::memory::testing::at;

namespace {
sublet::StreamHandle capture_stream() { return reinterpret_cast<sublet::StreamHandle>(std::uintptr_t{5}); }
}  // namespace

TEST(PrivatePools, CaptureAllocationsComeFromThePoolAndStayThere) {
  SimulatedAllocator a(1024 * kMiB);
  a.allocator.free(a.allocator.allocate(4 * kMiB, capture_stream()));  // cached in the default pool
  const auto pool = a.allocator.create_private_pool();
  a.allocator.begin_allocate_to_pool(pool, capture_stream());
  Block* inside = a.allocator.allocate(4 * kMiB, capture_stream());
  EXPECT_EQ(a.stat("num_device_alloc"), 2);  // not the cached default block: a new pool segment
  char* inside_at = at(inside);
  a.allocator.free(inside);
  Block* again = a.allocator.allocate(4 * kMiB, capture_stream());  // reuse inside the pool
  EXPECT_EQ(at(again), inside_at);
  a.allocator.free(again);
  a.allocator.end_allocate_to_pool(pool);

  Block* outside = a.allocator.allocate(4 * kMiB, capture_stream());  // default pool again
  EXPECT_NE(at(outside), inside_at);
  a.allocator.free(outside);
  a.allocator.empty_cache();  // must not touch the pool: a graph may replay into it
  EXPECT_EQ(a.allocator.memory_reserved(), 20 * kMiB);
  const auto segments = a.allocator.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].private_pool_id, pool);

  a.allocator.release_private_pool(pool);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_EQ(a.backend->used_bytes(), 0u);
  sublet::memory::testing::expect_consistent(a.allocator);
}

TEST(PrivatePools, ReleasedPoolGivesSegmentsBackWhenTheirBlocksAreFreed) {
  SimulatedAllocator a(1024 * kMiB);
  const auto pool = a.allocator.create_private_pool();
  a.allocator.begin_allocate_to_pool(pool, capture_stream());
  Block* held = a.allocator.allocate(30 * kMiB, capture_stream());
  a.allocator.end_allocate_to_pool(pool);
  a.allocator.release_private_pool(pool);
  EXPECT_EQ(a.allocator.memory_reserved(), 30 * kMiB);  // still in use
  a.allocator.free(held);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_THROW(a.allocator.begin_allocate_to_pool(pool, capture_stream()), sublet::Error);
}

TEST(PrivatePools, OtherStreamsAreNotCaptured) {
  SimulatedAllocator a(1024 * kMiB);
  const auto pool = a.allocator.create_private_pool();
  a.allocator.begin_allocate_to_pool(pool, capture_stream());
  Block* other = a.allocator.allocate(kMiB, nullptr);
  a.allocator.end_allocate_to_pool(pool);
  a.allocator.free(other);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);  // it came from the default pool
  a.allocator.release_private_pool(pool);
}

TEST(NoCaching, EveryRequestIsItsOwnSegmentAndFreeReturnsIt) {
  auto backend = std::make_unique<SimulatedBackend>(1024 * kMiB);
  SimulatedBackend* sim = backend.get();
  AllocatorConfig config;
  config.caching = false;
  CachingAllocator allocator(std::move(backend), config);
  Block* a = allocator.allocate(1000);
  Block* b = allocator.allocate(3 * kMiB + 1);
  EXPECT_EQ(allocator.memory_reserved(), 1024 + 3 * kMiB + 512);  // exact (rounded) segments
  allocator.free(a);
  EXPECT_EQ(allocator.memory_reserved(), 3 * kMiB + 512);
  allocator.free(b);
  EXPECT_EQ(allocator.memory_reserved(), 0u);
  EXPECT_EQ(sim->allocate_calls(), 2u);
  EXPECT_EQ(sim->free_calls(), 2u);
  EXPECT_EQ(allocator.max_memory_allocated(), 1024 + 3 * kMiB + 512);
}

TEST(Registry, AllocatorKindsAndReplacement) {
  using sublet::Device;
  EXPECT_EQ(parse_allocator_kind("raw"), AllocatorKind::Raw);
  EXPECT_THROW(parse_allocator_kind("pool"), sublet::ValueError);
  EXPECT_THROW(make_allocator(Device::cpu(), AllocatorKind::Async), sublet::ValueError);
  CachingAllocator& before = allocator_for(Device::cpu());
  Block* live = before.allocate(kMiB);
  EXPECT_THROW(replace_allocator(Device::cpu(), make_allocator(Device::cpu(), AllocatorKind::Raw)), sublet::Error);
  before.free(live);
  replace_allocator(Device::cpu(), make_allocator(Device::cpu(), AllocatorKind::Raw));
  CachingAllocator& raw = allocator_for(Device::cpu());
  EXPECT_FALSE(raw.config().caching);
  raw.free(raw.allocate(kMiB));
  EXPECT_EQ(raw.memory_reserved(), 0u);
  replace_allocator(Device::cpu(), make_allocator(Device::cpu(), AllocatorKind::Caching));
  EXPECT_TRUE(allocator_for(Device::cpu()).config().caching);
}
