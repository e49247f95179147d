// The allocator's size boundaries, each tested on both sides, so that moving one by a byte (a
// `>` made `>=`) fails a test. Both below survived such a mutation before these tests existed.
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

}  // namespace
}  // namespace sublet::memory
