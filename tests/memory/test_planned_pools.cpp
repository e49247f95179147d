// Recorded and statically planned private pools (CachingAllocator::record_private_pool and
// plan_private_pool): a recorded capture, laid out by the static planner, is served at exactly
// the planned offsets of one arena; a capture that departs from the plan falls back to the
// pool's usual rules and says where; the statistics stay consistent throughout.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "alloc_test_support.h"
#include "allocator_invariants.h"
#include "analysis/static_plan.h"
#include "core/errors.h"

namespace sublet::memory {
namespace {

using testing::SimulatedAllocator;
using Action = TraceEvent::Action;

StreamHandle capture_stream() { return reinterpret_cast<StreamHandle>(std::uintptr_t{7}); }

// A step-like request sequence: sizes from 512 B to 24 MiB, each freed some requests later,
// a few never freed (a step's outputs).
std::vector<TraceEvent> step_like_requests(std::uint64_t seed, int count) {
  std::mt19937_64 rng(seed);
  std::vector<TraceEvent> events;
  std::vector<std::uint64_t> live;
  for (int i = 1; i <= count; ++i) {
    const std::size_t size = rng() % 4 == 0 ? (rng() % (24 * kMiB)) + 1 : (rng() % (256 * 1024)) + 1;
    events.push_back({.action = Action::Alloc, .id = static_cast<std::uint64_t>(i), .size = size});
    live.push_back(static_cast<std::uint64_t>(i));
    while (!live.empty() && rng() % 3 != 0) {
      const std::size_t k = rng() % live.size();
      if (live[k] % 11 != 0) events.push_back({.action = Action::Free, .id = live[k]});  // every 11th lives on
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return events;
}

// Runs `events` on the capture stream into `pool`; returns the blocks still allocated by id.
// `on_alloc(index, block)` sees every allocation in request order.
template <class OnAlloc>
std::map<std::uint64_t, Block*> run_capture(CachingAllocator& allocator, CachingAllocator::PoolId pool,
                                            const std::vector<TraceEvent>& events, OnAlloc on_alloc) {
  std::map<std::uint64_t, Block*> live;
  allocator.begin_allocate_to_pool(pool, capture_stream());
  std::size_t index = 0;
  for (const TraceEvent& e : events) {
    if (e.action == Action::Alloc) {
      live[e.id] = allocator.allocate(e.size, capture_stream());
      on_alloc(index++, live[e.id]);
    } else if (e.action == Action::Free) {
      allocator.free(live.at(e.id));
      live.erase(e.id);
    }
  }
  allocator.end_allocate_to_pool(pool);
  return live;
}

std::vector<CachingAllocator::ArenaPlacement> placements_of(const StaticPlan& plan) {
  std::vector<CachingAllocator::ArenaPlacement> out;
  for (const PlannedAllocation& a : plan.allocations) out.push_back({.size = a.size, .offset = a.offset});
  return out;
}

void free_all(CachingAllocator& allocator, std::map<std::uint64_t, Block*>& live) {
  for (auto& [id, block] : live) allocator.free(block);
  live.clear();
}

TEST(PlannedPools, ARecordedCaptureIsServedAtItsPlannedOffsets) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SimulatedAllocator a(64 * 1024 * kMiB);
    const std::vector<TraceEvent> requests = step_like_requests(seed, 200);

    const auto recorded_pool = a.allocator.create_private_pool();
    a.allocator.record_private_pool(recorded_pool);
    auto outputs = run_capture(a.allocator, recorded_pool, requests, [](std::size_t, Block*) {});
    const std::vector<TraceEvent> recorded = a.allocator.recorded_private_pool(recorded_pool);
    free_all(a.allocator, outputs);
    a.allocator.release_private_pool(recorded_pool);
    ASSERT_EQ(a.allocator.memory_reserved(), 0u);

    const StaticPlan plan = plan_static_arena(recorded);
    ASSERT_TRUE(plan_is_valid(plan));
    ASSERT_EQ(plan.allocations.size(), static_cast<std::size_t>(std::count_if(
                                           requests.begin(), requests.end(), [](const TraceEvent& e) { return e.action == Action::Alloc; })));
    const auto planned_pool = a.allocator.create_private_pool();
    a.allocator.plan_private_pool(planned_pool, plan.arena_bytes, placements_of(plan));
    a.allocator.reset_peak_memory_stats();
    char* arena = nullptr;
    outputs = run_capture(a.allocator, planned_pool, requests, [&](std::size_t i, Block* b) {
      if (i == 0) arena = static_cast<char*>(b->ptr) - plan.allocations[0].offset;
      EXPECT_EQ(static_cast<char*>(b->ptr), arena + plan.allocations[i].offset) << "request " << i;
      EXPECT_EQ(b->size, plan.allocations[i].size) << "request " << i;
    });
    const auto status = a.allocator.private_pool_plan(planned_pool);
    EXPECT_TRUE(status.planned);
    EXPECT_EQ(status.abandoned, "");
    EXPECT_EQ(status.served, plan.allocations.size());
    EXPECT_EQ(a.allocator.max_memory_reserved(), plan.arena_bytes);  // one segment: the arena
    EXPECT_EQ(a.allocator.max_memory_allocated(), plan.lower_bound);
    EXPECT_EQ(a.stat("num_device_alloc"), a.stat("num_device_free") + 1);
    testing::expect_consistent(a.allocator);
    free_all(a.allocator, outputs);
    testing::expect_consistent(a.allocator);
    a.allocator.release_private_pool(planned_pool);
    EXPECT_EQ(a.allocator.memory_reserved(), 0u);
  }
}

TEST(PlannedPools, RecordingCoversOnlyTheCapture) {
  SimulatedAllocator a(1024 * kMiB);
  const auto pool = a.allocator.create_private_pool();
  a.allocator.record_private_pool(pool);
  a.allocator.begin_allocate_to_pool(pool, capture_stream());
  Block* kept = a.allocator.allocate(1000, capture_stream());
  Block* dropped = a.allocator.allocate(3 * kMiB, capture_stream());
  a.allocator.free(dropped);
  a.allocator.end_allocate_to_pool(pool);
  a.allocator.free(kept);  // after the capture: not part of the step
  const auto events = a.allocator.recorded_private_pool(pool);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].action, Action::Alloc);
  EXPECT_EQ(events[0].size, 1024u);  // rounded to 512 B, not by the allocator's own rules
  EXPECT_EQ(events[1].size, 3 * kMiB);
  EXPECT_EQ(events[2].action, Action::Free);
  EXPECT_EQ(events[2].id, events[1].id);
  a.allocator.release_private_pool(pool);
}

TEST(PlannedPools, ADepartureFromThePlanFallsBackAndSaysWhere) {
  SimulatedAllocator a(1024 * kMiB);
  const auto pool = a.allocator.create_private_pool();
  a.allocator.plan_private_pool(pool, 4 * kMiB, {{.size = 2 * kMiB, .offset = 0}, {.size = 2 * kMiB, .offset = 2 * kMiB}});
  a.allocator.begin_allocate_to_pool(pool, capture_stream());
  Block* first = a.allocator.allocate(2 * kMiB, capture_stream());
  Block* second = a.allocator.allocate(3 * kMiB, capture_stream());  // the plan says 2 MiB
  Block* third = a.allocator.allocate(2 * kMiB, capture_stream());   // after the departure: usual rules
  a.allocator.end_allocate_to_pool(pool);
  const auto status = a.allocator.private_pool_plan(pool);
  EXPECT_EQ(status.served, 1u);
  EXPECT_NE(status.abandoned.find("request #1"), std::string::npos) << status.abandoned;
  EXPECT_NE(status.abandoned.find("3145728 B"), std::string::npos) << status.abandoned;
  EXPECT_GE(second->size, 3 * kMiB);
  EXPECT_NE(third->ptr, nullptr);
  testing::expect_consistent(a.allocator);
  for (Block* b : {first, second, third}) a.allocator.free(b);
  a.allocator.release_private_pool(pool);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
}

TEST(PlannedPools, BytesStillInUseOrMoreRequestsThanPlannedAbandonThePlan) {
  SimulatedAllocator a(1024 * kMiB);
  const auto pool = a.allocator.create_private_pool();
  // Both requests planned on the same bytes, as if the first were freed before the second.
  a.allocator.plan_private_pool(pool, 1 * kMiB, {{.size = 1 * kMiB, .offset = 0}, {.size = 1 * kMiB, .offset = 0}});
  a.allocator.begin_allocate_to_pool(pool, capture_stream());
  Block* first = a.allocator.allocate(1 * kMiB, capture_stream());
  Block* second = a.allocator.allocate(1 * kMiB, capture_stream());  // but the first is still live
  EXPECT_NE(first->ptr, second->ptr);
  EXPECT_NE(a.allocator.private_pool_plan(pool).abandoned.find("still in use"), std::string::npos);
  a.allocator.end_allocate_to_pool(pool);
  a.allocator.free(first);
  a.allocator.free(second);
  a.allocator.release_private_pool(pool);

  const auto short_pool = a.allocator.create_private_pool();
  a.allocator.plan_private_pool(short_pool, 512, {{.size = 512, .offset = 0}});
  a.allocator.begin_allocate_to_pool(short_pool, capture_stream());
  Block* x = a.allocator.allocate(100, capture_stream());
  Block* y = a.allocator.allocate(100, capture_stream());
  a.allocator.end_allocate_to_pool(short_pool);
  EXPECT_NE(a.allocator.private_pool_plan(short_pool).abandoned.find("only 1 requests"), std::string::npos);
  a.allocator.free(x);
  a.allocator.free(y);
  testing::expect_consistent(a.allocator);
  a.allocator.release_private_pool(short_pool);
  EXPECT_EQ(a.allocator.memory_reserved(), 0u);
}

TEST(PlannedPools, PlacementsOutsideTheArenaOrOffTheGrainAreRefused) {
  SimulatedAllocator a(1024 * kMiB);
  const auto pool = a.allocator.create_private_pool();
  EXPECT_THROW(a.allocator.plan_private_pool(pool, 1024, {{.size = 1024, .offset = 512}}), ValueError);
  EXPECT_THROW(a.allocator.plan_private_pool(pool, 1024, {{.size = 100, .offset = 0}}), ValueError);
  EXPECT_THROW(a.allocator.plan_private_pool(pool, 1024, {{.size = 0, .offset = 0}}), ValueError);
  EXPECT_FALSE(a.allocator.private_pool_plan(pool).planned);
}

}  // namespace
}  // namespace sublet::memory
