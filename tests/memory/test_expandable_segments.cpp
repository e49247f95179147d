// Expandable segments: one address range per pool and stream, backed page by page as it grows,
// and given back from its tail on empty_cache.
#include <gtest/gtest.h>

#include <vector>

#include "alloc_test_support.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;
using sublet::memory::testing::at;

TEST(ExpandableSegments, GrowByMappingAtTheEnd) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  Block* first = a.allocator.allocate(3 * kMiB);
  EXPECT_EQ(a.allocator.memory_reserved(), 4 * kMiB);  // 3 MiB mapped in 2 MiB pages
  Block* second = a.allocator.allocate(5 * kMiB);      // the free 1 MiB tail + 4 MiB more
  EXPECT_EQ(a.allocator.memory_reserved(), 8 * kMiB);
  EXPECT_EQ(at(second), at(first) + 3 * kMiB);         // one contiguous range
  EXPECT_EQ(a.stat("segment.large_pool.current"), 1);
  EXPECT_EQ(a.stat("num_device_alloc"), 2);            // two map calls
  a.allocator.free(first);
  a.allocator.free(second);
  EXPECT_EQ(a.allocator.memory_allocated(), 0u);
  EXPECT_EQ(a.allocator.memory_reserved(), 8 * kMiB);  // two-step release holds here too
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_EQ(a.stat("segment.all.current"), 0);
  EXPECT_EQ(a.backend->used_bytes(), 0u);
}

TEST(ExpandableSegments, EmptyCacheUnmapsOnlyTheFreeTail) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  Block* kept = a.allocator.allocate(3 * kMiB);
  Block* freed = a.allocator.allocate(9 * kMiB);
  EXPECT_EQ(a.allocator.memory_reserved(), 12 * kMiB);
  a.allocator.free(freed);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 4 * kMiB);  // the page holding the end of `kept` stays
  EXPECT_EQ(a.backend->used_bytes(), 4 * kMiB);
  Block* again = a.allocator.allocate(5 * kMiB);        // grows again from the kept tail
  EXPECT_EQ(at(again), at(kept) + 3 * kMiB);
  EXPECT_EQ(a.allocator.memory_reserved(), 8 * kMiB);
  a.allocator.free(kept);
  a.allocator.free(again);
  a.allocator.empty_cache();
  EXPECT_EQ(a.backend->used_bytes(), 0u);
}

// Growing requests: fixed segments leave each smaller freed segment behind, an expandable
// segment reuses its range and only maps the difference.
TEST(ExpandableSegments, ReserveLessThanFixedSegmentsForGrowingRequests) {
  auto peak_reserved = [](const std::string& conf) {
    SimulatedAllocator a(4096 * kMiB, conf);
    for (std::size_t mib = 30; mib <= 120; mib += 10) a.allocator.free(a.allocator.allocate(mib * kMiB));
    return a.allocator.max_memory_reserved();
  };
  const std::size_t fixed = peak_reserved("");
  const std::size_t expandable = peak_reserved("expandable_segments:True");
  EXPECT_EQ(expandable, 120 * kMiB);
  EXPECT_GT(fixed, 3 * expandable);
}

// One range per stream for every size (caching_allocator.cpp, one_segment_per_stream): a separate
// small-pool range would leave its own partly used last page. Small requests still count in the
// small pool's allocation statistics, as without expandable segments.
TEST(ExpandableSegments, SmallAndLargeRequestsShareOneRange) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  Block* small = a.allocator.allocate(1000);
  Block* large = a.allocator.allocate(3 * kMiB);
  EXPECT_EQ(at(large), at(small) + 1024);  // right after the small block, in the same range
  EXPECT_EQ(a.stat("segment.small_pool.current"), 0);
  EXPECT_EQ(a.stat("segment.large_pool.current"), 1);
  EXPECT_EQ(a.allocator.memory_reserved(), 4 * kMiB);  // 3 MiB + 1 KiB in 2 MiB pages
  EXPECT_EQ(a.stat("allocated_bytes.small_pool.current"), 1024);
  EXPECT_EQ(a.stat("allocated_bytes.large_pool.current"), static_cast<std::int64_t>(3 * kMiB));
  EXPECT_EQ(a.stat("requested_bytes.small_pool.current"), 1000);
  EXPECT_EQ(a.stat("allocation.small_pool.current"), 1);
  a.allocator.free(small);
  EXPECT_EQ(a.stat("allocated_bytes.small_pool.current"), 0);
  EXPECT_EQ(a.stat("active_bytes.small_pool.current"), 0);
  EXPECT_EQ(a.stat("requested_bytes.small_pool.current"), 0);
  a.allocator.free(large);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
}

TEST(ExpandableSegments, FreeBlocksInsideTheRangeAreReused) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  std::vector<Block*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(a.allocator.allocate(2 * kMiB));
  const std::size_t reserved = a.allocator.memory_reserved();
  char* hole = at(blocks[3]);
  a.allocator.free(blocks[3]);
  Block* reuse = a.allocator.allocate(2 * kMiB);
  EXPECT_EQ(at(reuse), hole);
  EXPECT_EQ(a.allocator.memory_reserved(), reserved);
  blocks[3] = reuse;
  for (Block* b : blocks) a.allocator.free(b);
  auto segments = a.allocator.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_TRUE(segments[0].is_expandable);
  EXPECT_EQ(segments[0].blocks.size(), 1u);  // everything merged back
}
