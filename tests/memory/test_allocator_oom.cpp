// The out-of-memory path: free the cache and retry, then a clear OutOfMemoryError; afterwards
// the allocator keeps working.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "alloc_test_support.h"
#include "core/errors.h"

using namespace sublet::memory;
using sublet::OutOfMemoryError;
using sublet::memory::testing::SimulatedAllocator;

namespace {

std::string oom_message(CachingAllocator& allocator, std::size_t bytes) {
  try {
    Block* b = allocator.allocate(bytes);
    allocator.free(b);
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Five 20 MiB segments filled with 2 MiB blocks, every other one freed: 50 MiB free in 2 MiB holes.
std::vector<Block*> fragment(CachingAllocator& allocator) {
  std::vector<Block*> blocks;
  for (int i = 0; i < 50; ++i) blocks.push_back(allocator.allocate(2 * kMiB));
  std::vector<Block*> kept;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i % 2 == 0) allocator.free(blocks[i]); else kept.push_back(blocks[i]);
  }
  return kept;
}

}  // namespace

TEST(OutOfMemory, RetryAfterFreeingTheCacheSucceeds) {
  SimulatedAllocator a(100 * kMiB);
  a.allocator.free(a.allocator.allocate(30 * kMiB));
  a.backend->fail_nth_request(1);  // the next backend request fails once
  Block* b = a.allocator.allocate(40 * kMiB);
  EXPECT_EQ(a.stat("num_alloc_retries"), 1);
  EXPECT_EQ(a.stat("num_ooms"), 0);
  EXPECT_EQ(a.stat("num_device_free"), 1);  // the cached 30 MiB segment went back first
  EXPECT_EQ(a.allocator.memory_reserved(), 40 * kMiB);
  a.allocator.free(b);
}

TEST(OutOfMemory, OversizeBlocksAreReleasedFirst) {
  SimulatedAllocator a(200 * kMiB, "max_split_size_mb:40");
  a.allocator.free(a.allocator.allocate(60 * kMiB));  // oversize, cached
  a.allocator.free(a.allocator.allocate(30 * kMiB));  // ordinary, cached
  a.backend->fail_nth_request(1);
  Block* b = a.allocator.allocate(100 * kMiB);
  EXPECT_EQ(a.stat("num_alloc_retries"), 0);        // as PyTorch: releasing oversize blocks sufficed
  EXPECT_EQ(a.stat("num_device_free"), 1);          // only the oversize segment had to go
  EXPECT_EQ(a.allocator.memory_reserved(), 130 * kMiB);
  a.allocator.free(b);
}

TEST(OutOfMemory, ThrowsWithTheNumbersAndKeepsWorking) {
  SimulatedAllocator a(100 * kMiB);
  Block* held = a.allocator.allocate(60 * kMiB);
  const std::string message = oom_message(a.allocator, 60 * kMiB);
  ASSERT_FALSE(message.empty());
  EXPECT_TRUE(contains(message, "Tried to allocate 60.00 MiB")) << message;
  EXPECT_TRUE(contains(message, "total capacity of 100.00 MiB")) << message;
  EXPECT_TRUE(contains(message, "of which 40.00 MiB is free")) << message;
  EXPECT_TRUE(contains(message, "60.00 MiB is allocated by tensors")) << message;
  EXPECT_TRUE(contains(message, "0 B is reserved but unallocated")) << message;
  EXPECT_TRUE(contains(message, "Reduce the batch size")) << message;
  EXPECT_FALSE(contains(message, "expandable_segments")) << message;  // not a fragmentation problem
  EXPECT_EQ(a.stat("num_ooms"), 1);
  EXPECT_EQ(a.allocator.memory_allocated(), 60 * kMiB);  // nothing leaked by the failed request
  a.allocator.free(held);
  Block* now = a.allocator.allocate(60 * kMiB);  // the allocator still works
  EXPECT_EQ(a.allocator.memory_allocated(), 60 * kMiB);
  a.allocator.free(now);
}

TEST(OutOfMemory, FragmentationAdviceFitsTheConfiguration) {
  SimulatedAllocator a(100 * kMiB);
  std::vector<Block*> kept = fragment(a.allocator);
  const std::string message = oom_message(a.allocator, 4 * kMiB);
  EXPECT_TRUE(contains(message, "50.00 MiB is reserved but unallocated")) << message;
  EXPECT_TRUE(contains(message, "largest free cached block 2.00 MiB")) << message;
  EXPECT_TRUE(contains(message, "96% of the free reserved memory")) << message;
  EXPECT_TRUE(contains(message, "expandable_segments:True")) << message;
  EXPECT_TRUE(contains(message, "max_split_size_mb")) << message;
  for (Block* b : kept) a.allocator.free(b);

  SimulatedAllocator limited(100 * kMiB, "max_split_size_mb:100");
  kept = fragment(limited.allocator);
  const std::string with_split = oom_message(limited.allocator, 4 * kMiB);
  EXPECT_TRUE(contains(with_split, "expandable_segments:True")) << with_split;
  EXPECT_FALSE(contains(with_split, "Setting max_split_size_mb")) << with_split;  // already set
  for (Block* b : kept) limited.allocator.free(b);
}

TEST(OutOfMemory, ExpandableSegmentsAdviceIsNotRepeatedWhenOn) {
  SimulatedAllocator a(8 * kMiB, "expandable_segments:True");
  Block* held = a.allocator.allocate(6 * kMiB);
  const std::string message = oom_message(a.allocator, 4 * kMiB);
  ASSERT_FALSE(message.empty());
  EXPECT_FALSE(contains(message, "expandable_segments:True")) << message;
  a.allocator.free(held);
}

TEST(OutOfMemory, MemoryFractionCapIsNamed) {
  SimulatedAllocator a(100 * kMiB);
  a.allocator.set_memory_fraction(0.5);
  const std::string message = oom_message(a.allocator, 60 * kMiB);
  EXPECT_TRUE(contains(message, "caps sublet at 50.00 MiB")) << message;
  EXPECT_TRUE(contains(message, "raise the memory fraction")) << message;
  EXPECT_THROW(a.allocator.set_memory_fraction(1.5), sublet::ConfigError);
}

TEST(OutOfMemory, ImpossibleRequestsThrowInsteadOfOverflowing) {
  SimulatedAllocator a(100 * kMiB);
  EXPECT_THROW(a.allocator.allocate(std::numeric_limits<std::size_t>::max()), OutOfMemoryError);
  EXPECT_THROW(a.allocator.allocate(std::numeric_limits<std::size_t>::max() - 100), OutOfMemoryError);
  EXPECT_EQ(a.stat("num_ooms"), 2);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
}

// Fail the n-th backend request for every n over a fixed workload that needs four segments:
// one transient failure is always absorbed by the retry, and everything returns to zero.
TEST(OutOfMemory, FailNthSweepAlwaysRecovers) {
  for (std::uint64_t n = 1; n <= 8; ++n) {
    SimulatedAllocator a(128 * kMiB);
    a.backend->fail_nth_request(n);
    std::vector<Block*> live;
    for (std::size_t size : {kMiB / 2, 3 * kMiB, 12 * kMiB, std::size_t{700} * 1024, 25 * kMiB, 2 * kMiB, 5 * kMiB})
      live.push_back(a.allocator.allocate(size));
    EXPECT_EQ(a.stat("num_alloc_retries"), n <= 4 ? 1 : 0) << "n=" << n;
    EXPECT_EQ(a.stat("num_device_alloc"), 4) << "n=" << n;
    for (Block* b : live) a.allocator.free(b);
    EXPECT_EQ(a.allocator.memory_allocated(), 0u) << "n=" << n;
    a.allocator.empty_cache();
    EXPECT_EQ(a.backend->used_bytes(), 0u) << "n=" << n;
  }
}
