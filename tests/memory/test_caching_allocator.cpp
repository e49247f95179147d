// The caching allocator's rules, made deterministic by the simulated backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <vector>

#include "alloc_test_support.h"
#include "core/errors.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;
using sublet::memory::testing::at;

namespace {
constexpr std::size_t kGiB = 1024 * kMiB;
sublet::StreamHandle stream(int n) { return reinterpret_cast<sublet::StreamHandle>(static_cast<std::uintptr_t>(n)); }
}  // namespace

TEST(SegmentSizes, FollowPyTorchRules) {
  EXPECT_EQ(CachingAllocator::segment_size_for(512), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size_for(13 * kMiB + 512), 14 * kMiB);
}

TEST(PoolChoice, SmallRequestsUseTheSmallPool) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(1000);
  EXPECT_EQ(b->size, 1024u);
  EXPECT_TRUE(b->pool->is_small);
  EXPECT_EQ(a.stat("reserved_bytes.small_pool.current"), static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(a.stat("reserved_bytes.large_pool.current"), 0);
  Block* c = a.allocator.allocate(kMiB);  // exactly 1 MiB is still small
  EXPECT_TRUE(c->pool->is_small);
  EXPECT_EQ(a.stat("segment.small_pool.current"), 1);  // fits in the same 2 MiB segment
  a.allocator.free(b);
  a.allocator.free(c);
}

TEST(PoolChoice, LargeRequestsUseTheLargePoolAndItsSegmentSizes) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(kMiB + 1);
  EXPECT_FALSE(b->pool->is_small);
  EXPECT_EQ(a.allocator.memory_reserved(), 20 * kMiB);
  Block* c = a.allocator.allocate(13 * kMiB + 5);  // fits the first segment's remainder
  EXPECT_EQ(c->size, 13 * kMiB + 512);
  Block* d = a.allocator.allocate(30 * kMiB);
  EXPECT_EQ(a.stat("segment.large_pool.current"), 2);  // 13 MiB came from the first segment's remainder
  EXPECT_EQ(a.allocator.memory_reserved(), 50 * kMiB);
  for (Block* x : {b, c, d}) a.allocator.free(x);
}

TEST(Splitting, LargeBlockSplitsWhenRemainderExceedsOneMiB) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(2 * kMiB);
  EXPECT_EQ(b->size, 2 * kMiB);
  EXPECT_EQ(a.stat("inactive_split.large_pool.current"), 1);
  EXPECT_EQ(a.stat("inactive_split_bytes.large_pool.current"), static_cast<std::int64_t>(18 * kMiB));
  a.allocator.free(b);
  EXPECT_EQ(a.stat("inactive_split.all.current"), 0);  // merged back into one whole segment
}

TEST(Splitting, LargeBlockKeepsASmallRemainder) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(19 * kMiB + kMiB / 2);  // 0.5 MiB would remain: not worth a block
  EXPECT_EQ(b->size, 20 * kMiB);
  EXPECT_EQ(a.allocator.memory_allocated(), 20 * kMiB);
  EXPECT_EQ(a.stat("requested_bytes.all.current"), static_cast<std::int64_t>(19 * kMiB + kMiB / 2));
  EXPECT_EQ(a.stat("inactive_split.all.current"), 0);
  a.allocator.free(b);
}

TEST(Splitting, SmallBlockSplitsDownTo512Bytes) {
  SimulatedAllocator a(kGiB);
  Block* first = a.allocator.allocate(kMiB);
  Block* second = a.allocator.allocate(kMiB - 600);  // rounds to 1 MiB - 512: leaves exactly 512 B
  EXPECT_EQ(second->size, kMiB - 512);
  EXPECT_EQ(a.stat("inactive_split_bytes.small_pool.current"), 512);
  Block* third = a.allocator.allocate(100);  // takes the last 512 bytes: nothing remains, no split
  EXPECT_EQ(third->size, 512u);
  EXPECT_EQ(at(third), at(second) + second->size);
  EXPECT_EQ(a.stat("inactive_split.small_pool.current"), 0);
  EXPECT_EQ(a.stat("segment.small_pool.current"), 1);
  for (Block* x : {first, second, third}) a.allocator.free(x);
}

TEST(BestFit, PicksTheSmallestFreeBlockThatFits) {
  SimulatedAllocator a(kGiB);
  // One 20 MiB segment cut into [4][x][3][y][rest]; freeing 4 and 3 leaves two holes.
  Block* four = a.allocator.allocate(4 * kMiB);
  Block* x = a.allocator.allocate(2 * kMiB);
  Block* three = a.allocator.allocate(3 * kMiB);
  Block* y = a.allocator.allocate(2 * kMiB);
  Block* rest = a.allocator.allocate(9 * kMiB);
  char* three_at = at(three);
  a.allocator.free(four);
  a.allocator.free(three);
  Block* fit = a.allocator.allocate(3 * kMiB);
  EXPECT_EQ(at(fit), three_at);
  EXPECT_EQ(a.stat("num_device_alloc"), 1);
  for (Block* b : {x, y, rest, fit}) a.allocator.free(b);
}

TEST(Streams, FreeBlocksServeOnlyTheirOwnStream) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(4 * kMiB, stream(1));
  a.allocator.free(b);
  Block* other = a.allocator.allocate(4 * kMiB, stream(2));
  EXPECT_EQ(a.stat("num_device_alloc"), 2);
  Block* same = a.allocator.allocate(4 * kMiB, stream(1));
  EXPECT_EQ(a.stat("num_device_alloc"), 2);
  a.allocator.free(other);
  a.allocator.free(same);
}

// Three neighbours in one segment, freed in each of the six orders: the segment must always
// end as a single free block, with no inactive split left.
class Coalescing : public ::testing::TestWithParam<std::array<int, 3>> {};

TEST_P(Coalescing, FreeNeighboursMergeInAnyOrder) {
  SimulatedAllocator a(kGiB);
  std::array<Block*, 3> blocks{};
  for (auto& b : blocks) b = a.allocator.allocate(2 * kMiB);
  Block* tail = a.allocator.allocate(14 * kMiB);  // fills the segment
  EXPECT_EQ(at(blocks[1]), at(blocks[0]) + 2 * kMiB);
  for (int i : GetParam()) a.allocator.free(blocks[static_cast<std::size_t>(i)]);
  auto segments = a.allocator.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  ASSERT_EQ(segments[0].blocks.size(), 2u);  // [6 MiB free][14 MiB in use]
  EXPECT_EQ(segments[0].blocks[0].size, 6 * kMiB);
  EXPECT_EQ(segments[0].blocks[0].state, BlockInfo::State::Inactive);
  EXPECT_EQ(a.stat("inactive_split.large_pool.current"), 1);
  EXPECT_EQ(a.stat("inactive_split_bytes.large_pool.current"), static_cast<std::int64_t>(6 * kMiB));
  a.allocator.free(tail);
  segments = a.allocator.snapshot();
  ASSERT_EQ(segments[0].blocks.size(), 1u);
  EXPECT_EQ(segments[0].blocks[0].size, 20 * kMiB);
  EXPECT_EQ(a.stat("inactive_split.all.current"), 0);
  EXPECT_EQ(a.stat("inactive_split_bytes.all.current"), 0);
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Coalescing,
                         ::testing::Values(std::array<int, 3>{0, 1, 2}, std::array<int, 3>{0, 2, 1},
                                           std::array<int, 3>{1, 0, 2}, std::array<int, 3>{1, 2, 0},
                                           std::array<int, 3>{2, 0, 1}, std::array<int, 3>{2, 1, 0}));

TEST(Oversize, BlocksAboveMaxSplitAreNeverSplit) {
  SimulatedAllocator a(kGiB, "max_split_size_mb:40");
  Block* big = a.allocator.allocate(50 * kMiB);
  EXPECT_EQ(a.stat("oversize_allocations.current"), 1);
  EXPECT_EQ(a.stat("oversize_segments.current"), 1);
  char* big_at = at(big);
  a.allocator.free(big);
  EXPECT_EQ(a.stat("oversize_allocations.current"), 0);

  Block* near = a.allocator.allocate(45 * kMiB);  // within 20 MiB: reuses the whole 50 MiB block
  EXPECT_EQ(at(near), big_at);
  EXPECT_EQ(near->size, 50 * kMiB);
  EXPECT_EQ(a.stat("inactive_split.all.current"), 0);
  a.allocator.free(near);

  Block* below = a.allocator.allocate(25 * kMiB);  // below max_split: must not take the oversize block
  EXPECT_NE(at(below), big_at);
  EXPECT_EQ(a.stat("num_device_alloc"), 2);
  a.allocator.free(below);
  EXPECT_EQ(a.stat("max_split_size"), static_cast<std::int64_t>(40 * kMiB));
}

TEST(Oversize, FarLargerOversizeBlocksAreNotReused) {
  SimulatedAllocator a(kGiB, "max_split_size_mb:40");
  Block* huge = a.allocator.allocate(80 * kMiB);
  a.allocator.free(huge);
  Block* medium = a.allocator.allocate(45 * kMiB);  // 80 >= 45 + 20: would waste too much
  EXPECT_EQ(a.stat("num_device_alloc"), 2);
  EXPECT_EQ(medium->size, 46 * kMiB);
  a.allocator.free(medium);
}

TEST(TwoStepRelease, AllocatedDropsAtOnceReservedOnlyOnEmptyCache) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(8 * kMiB);
  EXPECT_EQ(a.allocator.memory_allocated(), 8 * kMiB);
  EXPECT_EQ(a.allocator.memory_reserved(), 20 * kMiB);
  a.allocator.free(b);
  EXPECT_EQ(a.allocator.memory_allocated(), 0u);         // step 1
  EXPECT_EQ(a.allocator.memory_reserved(), 20 * kMiB);   // step 2: cached, not returned
  EXPECT_EQ(a.backend->free_calls(), 0u);
  Block* again = a.allocator.allocate(8 * kMiB);         // served from the cache
  EXPECT_EQ(a.backend->allocate_calls(), 1u);
  a.allocator.free(again);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_EQ(a.backend->free_calls(), 1u);
  EXPECT_EQ(a.backend->used_bytes(), 0u);
}

TEST(Peaks, TrackAndReset) {
  SimulatedAllocator a(kGiB);
  Block* x = a.allocator.allocate(10 * kMiB);
  Block* y = a.allocator.allocate(20 * kMiB);
  a.allocator.free(y);
  EXPECT_EQ(a.allocator.max_memory_allocated(), 30 * kMiB);
  EXPECT_EQ(a.allocator.max_memory_reserved(), 30 * kMiB);
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.max_memory_reserved(), 30 * kMiB);
  a.allocator.reset_peak_memory_stats();
  EXPECT_EQ(a.allocator.max_memory_allocated(), 10 * kMiB);
  EXPECT_EQ(a.allocator.max_memory_reserved(), 10 * kMiB);
  EXPECT_EQ(a.stat("allocation.all.allocated"), 2);
  EXPECT_EQ(a.stat("allocation.all.freed"), 1);
  a.allocator.reset_accumulated_memory_stats();
  EXPECT_EQ(a.stat("allocation.all.allocated"), 0);
  EXPECT_EQ(a.stat("allocation.all.freed"), 0);
  EXPECT_EQ(a.stat("num_device_alloc"), 0);
  EXPECT_EQ(a.stat("allocation.all.current"), 1);  // current values are not accumulated counts
  a.allocator.free(x);
}

TEST(Stats, EveryFamilyMovesAsDocumented) {
  SimulatedAllocator a(kGiB);
  Block* small = a.allocator.allocate(1000);
  Block* large = a.allocator.allocate(3 * kMiB);
  const auto s = a.allocator.memory_stats();
  EXPECT_EQ(s.at("allocation.all.current"), 2);
  EXPECT_EQ(s.at("allocation.small_pool.current"), 1);
  EXPECT_EQ(s.at("allocation.large_pool.current"), 1);
  EXPECT_EQ(s.at("segment.all.current"), 2);
  EXPECT_EQ(s.at("active.all.current"), 2);
  EXPECT_EQ(s.at("allocated_bytes.small_pool.current"), 1024);
  EXPECT_EQ(s.at("allocated_bytes.large_pool.current"), static_cast<std::int64_t>(3 * kMiB));
  EXPECT_EQ(s.at("requested_bytes.small_pool.current"), 1000);
  EXPECT_EQ(s.at("active_bytes.all.current"), static_cast<std::int64_t>(3 * kMiB + 1024));
  EXPECT_EQ(s.at("reserved_bytes.all.current"), static_cast<std::int64_t>(22 * kMiB));
  EXPECT_EQ(s.at("inactive_split.all.current"), 2);
  EXPECT_EQ(s.at("inactive_split_bytes.all.current"), static_cast<std::int64_t>(22 * kMiB - 3 * kMiB - 1024));
  EXPECT_EQ(s.at("num_device_alloc"), 2);
  EXPECT_EQ(s.at("num_alloc_retries"), 0);
  EXPECT_EQ(s.at("num_ooms"), 0);
  EXPECT_EQ(s.at("num_sync_all_streams"), 0);
  EXPECT_EQ(s.at("max_split_size"), -1);
  a.allocator.free(small);
  a.allocator.free(large);
  a.allocator.empty_cache();
  const auto t = a.allocator.memory_stats();
  EXPECT_EQ(t.at("allocation.all.freed"), 2);
  EXPECT_EQ(t.at("segment.all.freed"), 2);
  EXPECT_EQ(t.at("reserved_bytes.all.freed"), static_cast<std::int64_t>(22 * kMiB));
  EXPECT_EQ(t.at("active.all.current"), 0);
  EXPECT_EQ(t.at("requested_bytes.all.current"), 0);
  EXPECT_EQ(t.at("num_device_free"), 2);
  EXPECT_EQ(t.at("reserved_bytes.all.peak"), static_cast<std::int64_t>(22 * kMiB));
}

TEST(RecordStream, BlockWaitsForTheOtherStreamBeforeReuse) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(4 * kMiB, stream(1));
  char* b_at = at(b);
  a.allocator.record_stream(b, stream(2));
  a.allocator.free(b);
  EXPECT_EQ(a.allocator.memory_allocated(), 0u);     // step 1 happens at once
  EXPECT_EQ(a.stat("active.all.current"), 1);         // still in use by stream 2's work
  Block* meanwhile = a.allocator.allocate(4 * kMiB, stream(1));
  EXPECT_NE(at(meanwhile), b_at);
  a.backend->complete_stream_work(stream(2));
  Block* later = a.allocator.allocate(4 * kMiB, stream(1));
  EXPECT_EQ(at(later), b_at);
  a.allocator.free(meanwhile);
  a.allocator.free(later);
  EXPECT_EQ(a.stat("active.all.current"), 0);
}

// The allocator stops asking about a stream's events at its first pending one (they complete in
// order); another stream's completed work must still give its blocks back, before and after it.
TEST(RecordStream, APendingStreamDoesNotHoldBackBlocksOfAnother) {
  SimulatedAllocator a(kGiB);
  std::array<Block*, 3> blocks{};
  std::array<char*, 3> addresses{};
  const std::array<int, 3> use = {2, 3, 2};  // stream 2's work stays pending; stream 3's completes
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    blocks[i] = a.allocator.allocate(4 * kMiB, stream(1));
    addresses[i] = at(blocks[i]);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    a.allocator.record_stream(blocks[i], stream(use[i]));
    a.allocator.free(blocks[i]);
  }
  EXPECT_EQ(a.stat("active.all.current"), 3);
  a.backend->complete_stream_work(stream(3));
  Block* next = a.allocator.allocate(4 * kMiB, stream(1));  // processes the events first
  EXPECT_EQ(at(next), addresses[1]) << "the block that waited on stream 3 only";
  EXPECT_EQ(a.stat("active.all.current"), 3) << "two blocks still wait on stream 2, plus the new one";
  a.backend->complete_stream_work(stream(2));
  a.allocator.free(next);
  Block* last = a.allocator.allocate(4 * kMiB, stream(1));
  EXPECT_EQ(a.stat("active.all.current"), 1);
  a.allocator.free(last);
}

TEST(RecordStream, EmptyCacheWaitsForPendingEvents) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(4 * kMiB, stream(1));
  a.allocator.record_stream(b, stream(3));
  a.allocator.free(b);
  a.allocator.empty_cache();
  EXPECT_EQ(a.stat("num_sync_all_streams"), 1);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
}

TEST(GarbageCollection, ReclaimsOldCachedSegmentsAboveTheThreshold) {
  // The older segment is freed first; ages count best-fit lookups in the pool since the free.
  SimulatedAllocator gc(100 * kMiB, "garbage_collection_threshold:0.5");
  gc.allocator.set_memory_fraction(1.0);
  gc.allocator.free(gc.allocator.allocate(30 * kMiB));
  gc.allocator.free(gc.allocator.allocate(40 * kMiB));
  EXPECT_EQ(gc.allocator.memory_reserved(), 70 * kMiB);
  Block* big = gc.allocator.allocate(45 * kMiB);  // a miss, with 70 MiB cached > 50 MiB threshold
  EXPECT_EQ(gc.stat("num_alloc_retries"), 0);   // GC made room before the backend said no
  EXPECT_EQ(gc.stat("num_device_free"), 1);     // only the oldest segment went back
  EXPECT_EQ(gc.allocator.memory_reserved(), 86 * kMiB);
  gc.allocator.free(big);

  // Without the threshold the same sequence hits the limit and needs a retry that frees all.
  SimulatedAllocator plain(100 * kMiB);
  plain.allocator.set_memory_fraction(1.0);
  plain.allocator.free(plain.allocator.allocate(30 * kMiB));
  plain.allocator.free(plain.allocator.allocate(40 * kMiB));
  Block* b = plain.allocator.allocate(45 * kMiB);
  EXPECT_EQ(plain.stat("num_alloc_retries"), 1);
  EXPECT_EQ(plain.stat("num_device_free"), 2);
  plain.allocator.free(b);
}

TEST(Snapshot, DescribesSegmentsAndBlocks) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(3 * kMiB, nullptr, BlockCategory::Activation);
  const auto segments = a.allocator.snapshot();
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].total_size, 20 * kMiB);
  EXPECT_EQ(segments[0].allocated_size, 3 * kMiB);
  ASSERT_EQ(segments[0].blocks.size(), 2u);
  EXPECT_EQ(segments[0].blocks[0].state, BlockInfo::State::ActiveAllocated);
  EXPECT_EQ(segments[0].blocks[0].category, BlockCategory::Activation);
  EXPECT_EQ(segments[0].blocks[0].requested_size, 3 * kMiB);
  EXPECT_EQ(segments[0].blocks[1].state, BlockInfo::State::Inactive);
  EXPECT_DOUBLE_EQ(a.allocator.fragmentation(), 0.0);  // one free block: nothing fragmented
  a.allocator.free(b);
}

TEST(Errors, DoubleFreeIsReported) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(kMiB);
  a.allocator.free(b);
  EXPECT_THROW(a.allocator.free(b), sublet::Error);
}

TEST(Config, CannotChangeUnderLiveBlocks) {
  SimulatedAllocator a(kGiB);
  Block* b = a.allocator.allocate(kMiB);
  EXPECT_THROW(a.allocator.set_config(AllocatorConfig::parse("max_split_size_mb:100")), sublet::ConfigError);
  a.allocator.free(b);
  a.allocator.set_config(AllocatorConfig::parse("max_split_size_mb:100"));
  EXPECT_EQ(a.allocator.config().max_split_size, 100 * kMiB);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);  // the old cache was released
}

// An allocator destroyed while callers still hold blocks (on several streams, some used on
// another stream) gives back what is cached and leaves the heap intact: its free-block bins and
// segment list let go of the Blocks before the Blocks themselves go.
TEST(Lifetime, DestroyingTheAllocatorWithLiveBlocksLeavesTheHeapIntact) {
  std::mt19937 rng(1);
  for (int round = 0; round < 20; ++round) {
    auto a = std::make_unique<SimulatedAllocator>(kGiB);
    std::vector<Block*> live;
    for (int i = 0; i < 300; ++i) {
      if (rng() % 2 || live.empty()) {
        Block* b = a->allocator.allocate(1 + rng() % (8 * kMiB), stream(1 + static_cast<int>(rng() % 2)));
        if (rng() % 10 == 0) a->allocator.record_stream(b, stream(3));
        live.push_back(b);
      } else {
        const std::size_t k = rng() % live.size();
        a->allocator.free(live[k]);
        live[k] = live.back();
        live.pop_back();
      }
    }
    EXPECT_FALSE(live.empty());
    a.reset();  // `live` is not freed: its blocks are lost with the allocator
  }
}
