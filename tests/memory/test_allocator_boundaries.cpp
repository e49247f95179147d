// The allocator's size boundaries, each tested on both sides, so that moving one by a byte (a
// `>` made `>=`) fails a test (the first two survived such a mutation before these tests
// existed), and the rules where sublet must count and collect as PyTorch does.
#include <gtest/gtest.h>

#include "alloc_test_support.h"

namespace sublet::memory {
namespace {

using testing::SimulatedAllocator;
constexpr std::size_t kGiB = 1024 * kMiB;

// A large block splits only when more than 1 MiB (kSmallSize) would remain, as PyTorch:
// exactly 1 MiB left stays with the block.
TEST(AllocatorBoundaries, LargeBlockLeavingExactlyOneMiBIsNotSplit) {
  SimulatedAllocator a(kGiB);
  Block* exact = a.allocator.allocate(19 * kMiB);  // a 20 MiB segment: exactly 1 MiB would remain
  EXPECT_EQ(exact->size, 20 * kMiB);
  EXPECT_EQ(a.stat("inactive_split.all.current"), 0);
  a.allocator.free(exact);

  Block* below = a.allocator.allocate(19 * kMiB - kMinBlockSize);  // 1 MiB + 512 B would remain: split
  EXPECT_EQ(below->size, 19 * kMiB - kMinBlockSize);
  EXPECT_EQ(a.stat("inactive_split.all.current"), 1);
  a.allocator.free(below);
}

// An oversize cached block (>= max_split_size) serves a request only when it is less than
// 20 MiB (kLargeBuffer) larger: a block of exactly request + 20 MiB is not reused.
TEST(AllocatorBoundaries, OversizeBlockOfExactlyRequestPlus20MiBIsNotReused) {
  SimulatedAllocator a(kGiB, "max_split_size_mb:40");
  Block* big = a.allocator.allocate(66 * kMiB);
  void* big_at = big->ptr;
  a.allocator.free(big);

  Block* exact = a.allocator.allocate(46 * kMiB);  // 66 = 46 + 20: a new segment
  EXPECT_NE(exact->ptr, big_at);
  EXPECT_EQ(a.stat("num_device_alloc"), 2);
  a.allocator.free(exact);

  Block* within = a.allocator.allocate(46 * kMiB + kMinBlockSize);  // 66 < 46 MiB + 512 B + 20 MiB: reused
  EXPECT_EQ(within->ptr, big_at);
  EXPECT_EQ(within->size, 66 * kMiB);
  EXPECT_EQ(a.stat("num_device_alloc"), 2);
  a.allocator.free(within);
}

// PyTorch's garbage collection frees large-pool segments only: a small segment that has gone
// unused longest stays cached.
TEST(AllocatorParity, GarbageCollectionReclaimsLargePoolSegmentsOnly) {
  SimulatedAllocator a(100 * kMiB, "garbage_collection_threshold:0.5");
  a.allocator.set_memory_fraction(1.0);
  const StreamHandle other = reinterpret_cast<StreamHandle>(std::uintptr_t{2});
  a.allocator.free(a.allocator.allocate(512 * 1024));  // a small segment, cached on the default stream
  // Small-pool lookups on another stream age it (ages count lookups in the pool since the free).
  for (int i = 0; i < 20; ++i) a.allocator.free(a.allocator.allocate(512 * 1024, other));
  a.allocator.free(a.allocator.allocate(30 * kMiB));
  a.allocator.free(a.allocator.allocate(40 * kMiB));
  ASSERT_EQ(a.stat("segment.small_pool.current"), 2);
  Block* big = a.allocator.allocate(45 * kMiB);  // 74 MiB cached, above the 50 MiB threshold: GC
  EXPECT_EQ(a.stat("segment.small_pool.current"), 2) << "garbage collection freed a small-pool segment";
  EXPECT_EQ(a.stat("num_device_free"), 1);  // the older large segment (30 MiB) only
  a.allocator.free(big);
}

// num_alloc_retries counts what PyTorch's counts: the attempt after the whole cache was given
// back, not a retry that releasing oversize blocks already satisfied.
TEST(AllocatorParity, AllocRetriesCountOnlyTheRetryAfterEmptyingTheCache) {
  SimulatedAllocator a(100 * kMiB, "max_split_size_mb:40");
  a.allocator.free(a.allocator.allocate(60 * kMiB));   // an oversize block, cached
  Block* b = a.allocator.allocate(50 * kMiB);           // within 20 MiB of the cached 60 MiB block: reused
  a.allocator.free(b);
  Block* fill = a.allocator.allocate(30 * kMiB);        // 30 + 60 cached = 90 of 100 MiB
  Block* large = a.allocator.allocate(35 * kMiB);       // no room: the oversize 60 MiB block is released first
  EXPECT_EQ(a.stat("num_alloc_retries"), 0) << "satisfied after releasing oversize blocks";
  a.allocator.free(large);
  a.allocator.free(fill);

  SimulatedAllocator plain(100 * kMiB);
  plain.allocator.free(plain.allocator.allocate(30 * kMiB));
  plain.allocator.free(plain.allocator.allocate(40 * kMiB));
  Block* c = plain.allocator.allocate(45 * kMiB);       // 70 cached + 46 > 100: the whole cache goes
  EXPECT_EQ(plain.stat("num_alloc_retries"), 1);
  plain.allocator.free(c);
}

}  // namespace
}  // namespace sublet::memory
