// Concurrent allocate/free/record_stream from several threads keeps every invariant.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "alloc_test_support.h"
#include "allocator_invariants.h"

using namespace sublet::memory;
using sublet::StreamHandle;
using sublet::memory::testing::SimulatedAllocator;

namespace {

// Each thread keeps up to `live_limit` blocks of random sizes (512 B to 16 MiB), freeing and
// allocating at random, recording a second stream on some; returns the blocks it still holds.
std::vector<Block*> churn(CachingAllocator& allocator, unsigned seed, int operations, std::size_t live_limit) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> log_size(9, 24);
  std::vector<Block*> live;
  const auto stream = reinterpret_cast<StreamHandle>(static_cast<std::uintptr_t>(seed % 3));
  for (int i = 0; i < operations; ++i) {
    if (!live.empty() && (live.size() >= live_limit || rng() % 2 == 0)) {
      const std::size_t victim = rng() % live.size();
      allocator.free(live[victim]);
      live[victim] = live.back();
      live.pop_back();
    } else {
      const std::size_t size = (std::size_t{1} << log_size(rng)) + rng() % 4096;
      Block* b = allocator.allocate(size, stream);
      if (rng() % 16 == 0) allocator.record_stream(b, reinterpret_cast<StreamHandle>(std::uintptr_t{7}));
      live.push_back(b);
    }
  }
  return live;
}

}  // namespace

TEST(AllocatorThreads, EightThreadsKeepStatsAndBlocksConsistent) {
  SimulatedAllocator a(std::size_t{64} << 30);
  constexpr int kThreads = 8;
  constexpr int kOperations = 20000;
  std::vector<std::vector<Block*>> survivors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { survivors[t] = churn(a.allocator, 1000 + t, kOperations, 32); });
  for (auto& th : threads) th.join();

  std::int64_t live_bytes = 0;
  for (const auto& blocks : survivors)
    for (const Block* b : blocks) live_bytes += static_cast<std::int64_t>(b->size);
  EXPECT_EQ(a.stat("allocated_bytes.all.current"), live_bytes);
  sublet::memory::testing::expect_consistent(a.allocator);

  for (const auto& blocks : survivors)
    for (Block* b : blocks) a.allocator.free(b);
  a.backend->complete_stream_work(reinterpret_cast<StreamHandle>(std::uintptr_t{7}));
  a.allocator.empty_cache();
  EXPECT_EQ(a.allocator.memory_allocated(), 0u);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  EXPECT_EQ(a.stat("active.all.current"), 0);
  EXPECT_EQ(a.backend->used_bytes(), 0u);
}

TEST(AllocatorThreads, ExpandableSegmentsUnderConcurrency) {
  SimulatedAllocator a(std::size_t{64} << 30, "expandable_segments:True");
  std::vector<std::vector<Block*>> survivors(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { survivors[t] = churn(a.allocator, 77 + t, 5000, 16); });
  for (auto& th : threads) th.join();
  sublet::memory::testing::expect_consistent(a.allocator);
  for (const auto& blocks : survivors)
    for (Block* b : blocks) a.allocator.free(b);
  a.backend->complete_stream_work(reinterpret_cast<StreamHandle>(std::uintptr_t{7}));
  a.allocator.empty_cache();
  EXPECT_EQ(a.backend->used_bytes(), 0u);
}
