// Expandable segments: one address range per stream, backed page by page as it grows, and
// given back page by page on empty_cache (free pages at its end and inside it).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "alloc_test_support.h"
#include "allocator_invariants.h"

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

// empty_cache() gives back whole free pages inside the range too, not only at its end; the
// hole then reads as a gap between two segments in the snapshot, and a request that fits it is
// mapped there again rather than at the end.
TEST(ExpandableSegments, EmptyCacheUnmapsFreePagesInsideTheRange) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  Block* low = a.allocator.allocate(2 * kMiB);
  Block* middle = a.allocator.allocate(6 * kMiB);
  Block* high = a.allocator.allocate(2 * kMiB);
  const char* hole = at(middle);
  a.allocator.free(middle);
  EXPECT_EQ(a.allocator.memory_reserved(), 10 * kMiB);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 4 * kMiB);
  EXPECT_EQ(a.allocator.memory_allocated(), 4 * kMiB);
  EXPECT_EQ(a.backend->used_bytes(), 4 * kMiB);
  EXPECT_EQ(a.stat("segment.all.current"), 1);  // still one range, now with a hole
  const auto runs = a.allocator.snapshot();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].total_size, 2 * kMiB);
  EXPECT_EQ(runs[1].address, reinterpret_cast<std::uintptr_t>(at(high)));
  sublet::memory::testing::expect_consistent(a.allocator);

  const auto maps_before = a.stat("num_device_alloc");
  Block* refill = a.allocator.allocate(4 * kMiB);  // fits the hole: mapped there, not at the end
  EXPECT_EQ(at(refill), hole);
  EXPECT_EQ(a.stat("num_device_alloc"), maps_before + 1);
  EXPECT_EQ(a.allocator.memory_reserved(), 8 * kMiB);  // only the 4 MiB it needed
  Block* rest = a.allocator.allocate(2 * kMiB);        // the rest of the hole
  EXPECT_EQ(at(rest), hole + 4 * kMiB);
  EXPECT_EQ(a.allocator.memory_reserved(), 10 * kMiB);
  sublet::memory::testing::expect_consistent(a.allocator);
  for (Block* b : {low, high, refill, rest}) a.allocator.free(b);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_EQ(a.backend->used_bytes(), 0u);
  EXPECT_EQ(a.stat("segment.all.current"), 0);
}

// A free block that starts or ends inside a page keeps those bytes free and mapped; a hole
// next to a free block is mapped only as far as a request needs beyond that block.
TEST(ExpandableSegments, PartlyFreePagesStayMappedAndServeWithTheHole) {
  SimulatedAllocator a(1024 * kMiB, "expandable_segments:True");
  Block* low = a.allocator.allocate(1 * kMiB + 512);  // [0, 1 MiB + 512)
  Block* middle = a.allocator.allocate(5 * kMiB);     // up to 6 MiB + 512: pages 2-4 MiB are wholly inside
  Block* high = a.allocator.allocate(1 * kMiB);
  EXPECT_EQ(a.allocator.memory_reserved(), 8 * kMiB);
  a.allocator.free(middle);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 4 * kMiB);  // pages [2, 6) MiB unmapped
  sublet::memory::testing::expect_consistent(a.allocator);
  Block* small = a.allocator.allocate(512 * 1024);    // fits the mapped free bytes before the hole
  EXPECT_EQ(at(small), at(low) + 1 * kMiB + 512);
  EXPECT_EQ(a.allocator.memory_reserved(), 4 * kMiB);
  a.allocator.free(small);
  Block* big = a.allocator.allocate(4 * kMiB);        // the free bytes before it + two pages of the hole
  EXPECT_EQ(at(big), at(low) + 1 * kMiB + 512);
  EXPECT_EQ(a.allocator.memory_reserved(), 8 * kMiB);
  sublet::memory::testing::expect_consistent(a.allocator);
  for (Block* b : {low, high, big}) a.allocator.free(b);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_EQ(a.backend->used_bytes(), 0u);
}

// Random sizes, frees and empty_cache() calls: the statistics always match the blocks, and
// everything goes back at the end.
TEST(ExpandableSegments, HolesKeepTheBookkeepingConsistent) {
  SimulatedAllocator a(4096 * kMiB, "expandable_segments:True");
  std::mt19937_64 rng(5);
  std::vector<Block*> live;
  int times_with_holes = 0;  // the range read as more than one run: holes were made and used
  for (int i = 0; i < 4000; ++i) {
    const unsigned op = static_cast<unsigned>(rng() % 100);
    if (!live.empty() && op < 45) {
      const std::size_t victim = rng() % live.size();
      a.allocator.free(live[victim]);
      live[victim] = live.back();
      live.pop_back();
    } else if (op < 48) {
      a.allocator.empty_cache();
      sublet::memory::testing::expect_consistent(a.allocator);
      if (a.allocator.snapshot().size() > 1) ++times_with_holes;
    } else {
      live.push_back(a.allocator.allocate((std::size_t{1} << (9 + rng() % 15)) + rng() % 100000));
    }
  }
  sublet::memory::testing::expect_consistent(a.allocator);
  EXPECT_GT(times_with_holes, 10);
  for (Block* b : live) a.allocator.free(b);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_EQ(a.backend->used_bytes(), 0u);
  EXPECT_EQ(a.stat("segment.all.current"), 0);
}
