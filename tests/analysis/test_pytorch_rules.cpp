// PyTorch 2.11's allocator rules as a replay model (analysis/pytorch_rules.h), each rule on a small
// trace whose figures the rule decides (the real H200 snapshots are in
// test_pytorch_snapshot_h200.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "analysis/pytorch_rules.h"
#include "memory/config.h"

namespace sublet::memory {
namespace {

constexpr std::size_t kCapacity = std::size_t{80} << 30;

struct Trace {
  std::vector<TraceEvent> events;
  std::uint64_t alloc(std::size_t size, std::uint64_t stream = 0) {
    events.push_back({.action = TraceEvent::Action::Alloc, .id = next, .size = size, .stream = stream});
    return next++;
  }
  void free(std::uint64_t id) { events.push_back({.action = TraceEvent::Action::Free, .id = id}); }
  void empty_cache() { events.push_back({.action = TraceEvent::Action::EmptyCache}); }
  std::uint64_t next = 1;
};

ReplayResult run(const Trace& t, const std::string& conf, const RecordedSegments* recorded = nullptr) {
  ReplayResult r = replay_trace_pytorch(t.events, conf, kCapacity, recorded);
  EXPECT_FALSE(r.out_of_memory) << r.oom_message;
  EXPECT_EQ(r.rules, "pytorch");
  return r;
}

TEST(PytorchRules, AllocatedBytesCountTheWholeBlockWhenTheRemainderIsNotSplitOff) {
  Trace t;
  t.alloc(11 * kMiB);  // a 12 MiB segment; the 1 MiB left is not > 1 MiB, so the block keeps it
  t.alloc(1000);       // 512-byte granule, from a 2 MiB small segment
  const ReplayResult r = run(t, "");
  EXPECT_EQ(r.peak_allocated, 12 * kMiB + 1024);
  EXPECT_EQ(r.peak_reserved, 14 * kMiB);
  EXPECT_EQ(r.device_allocs, 2);
}

TEST(PytorchRules, BestFitLooksOnlyAtTheFirstFitSoAnOversizeOneFailsTheSearch) {
  Trace t;
  t.free(t.alloc(200 * kMiB));  // cached, oversize under max_split_size_mb:128
  t.alloc(50 * kMiB);           // its first fit is that oversize block: a new segment instead
  const ReplayResult r = run(t, "max_split_size_mb:128");
  EXPECT_EQ(r.peak_reserved, 250 * kMiB);
  EXPECT_EQ(r.device_allocs, 2);
  // An oversize request takes a cached oversize block only within 20 MiB of its size.
  Trace near;
  near.free(near.alloc(200 * kMiB));
  near.alloc(190 * kMiB);
  EXPECT_EQ(run(near, "max_split_size_mb:128").device_allocs, 1);
  Trace far;
  far.free(far.alloc(200 * kMiB));
  far.alloc(150 * kMiB);
  EXPECT_EQ(run(far, "max_split_size_mb:128").device_allocs, 2);
}

TEST(PytorchRules, ExpandableSegmentsAreSeparateForTheSmallAndTheLargePoolWithTheirOwnPageSizes) {
  Trace t;
  t.alloc(1024);     // small pool: one 2 MiB page
  t.alloc(3 * kMiB);  // large pool: one 20 MiB page
  t.alloc(1024);
  t.alloc(3 * kMiB);
  const ReplayResult r = run(t, "expandable_segments:True");
  EXPECT_EQ(r.peak_reserved, 22 * kMiB);
  EXPECT_EQ(r.device_allocs, 2);
  EXPECT_EQ(r.peak_allocated, 6 * kMiB + 2048);  // every remainder >= 512 bytes is split off
}

TEST(PytorchRules, ARequestBeyondTheFreeTailMapsOnlyThePagesItLacks) {
  Trace t;
  t.alloc(15 * kMiB);  // page 1
  t.alloc(10 * kMiB);  // 5 MiB free at the tail + one more 20 MiB page, one block across both
  t.alloc(15 * kMiB);  // fits the 15 MiB left
  const ReplayResult r = run(t, "expandable_segments:True");
  EXPECT_EQ(r.peak_reserved, 40 * kMiB);
  EXPECT_EQ(r.device_allocs, 2);
}

TEST(PytorchRules, BestFitCountsAFreeTailTogetherWithItsUnmappedSpace) {
  Trace t;
  const auto a = t.alloc(6 * kMiB);
  t.alloc(2 * kMiB);
  t.alloc(8 * kMiB);  // one 20 MiB page: [6 free-to-be][2][8][4 free tail]
  t.free(a);
  // 4 MiB: the free tail (4 MiB + the unmapped rest) counts as larger than the 6 MiB hole, so the
  // hole is taken; then 6 MiB fits neither the 2 MiB left nor the tail, and the segment grows.
  t.alloc(4 * kMiB);
  t.alloc(6 * kMiB);
  const ReplayResult r = run(t, "expandable_segments:True");
  EXPECT_EQ(r.peak_reserved, 40 * kMiB);
  EXPECT_EQ(r.device_allocs, 2);
}

TEST(PytorchRules, EmptyCacheUnmapsWholeFreePagesAndGrowthRefillsTheLowestGapFirst) {
  Trace t;
  const auto a = t.alloc(30 * kMiB);  // two 20 MiB pages
  t.alloc(5 * kMiB);                  // [30][5][5 free] in 40 MiB
  t.free(a);
  t.empty_cache();                    // page 0 is wholly free, page 1 is not: 20 MiB unmapped
  // No free block holds 30 MiB; the lowest unmapped range (page 0) and the free 10 MiB after it
  // do, so page 0 is mapped again rather than pages at the end.
  t.alloc(30 * kMiB);
  const ReplayResult r = run(t, "expandable_segments:True");
  EXPECT_EQ(r.peak_reserved, 40 * kMiB);
  EXPECT_EQ(r.device_allocs, 2);

  Trace fixed;
  fixed.free(fixed.alloc(30 * kMiB));
  fixed.empty_cache();
  fixed.alloc(30 * kMiB);
  const ReplayResult f = run(fixed, "");
  EXPECT_EQ(f.peak_reserved, 30 * kMiB);
  EXPECT_EQ(f.device_allocs, 2);
}

TEST(PytorchRules, ACapacityTooSmallIsAnOutOfMemoryAtThatEvent) {
  Trace t;
  t.alloc(30 * kMiB);
  t.alloc(30 * kMiB);
  const ReplayResult r = replay_trace_pytorch(t.events, "", 50 * kMiB);
  EXPECT_TRUE(r.out_of_memory);
  EXPECT_EQ(r.oom_event, 1u);
  EXPECT_EQ(r.alloc_retries, 1);
}

}  // namespace
}  // namespace sublet::memory
