// The static arena plan of a recorded step (analysis/static_plan.h): planned offsets never overlap
// for allocations live at the same time, the arena is never below the live-bytes lower bound,
// and where the optimum is known the plan finds it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <random>

#include "analysis/static_plan.h"
#include "core/errors.h"

namespace sublet::memory {
namespace {

using Action = TraceEvent::Action;

TraceEvent alloc(std::uint64_t id, std::size_t size) { return {.action = Action::Alloc, .id = id, .size = size}; }
TraceEvent free_of(std::uint64_t id) { return {.action = Action::Free, .id = id}; }

// Most bytes live at once, counted event by event (independently of the planner's own sweep).
std::size_t brute_force_lower_bound(const std::vector<TraceEvent>& events) {
  std::map<std::uint64_t, std::size_t> live;
  std::size_t bytes = 0, peak = 0;
  for (const TraceEvent& e : events) {
    if (e.action == Action::Alloc) {
      const std::size_t rounded = (std::max<std::size_t>(e.size, 1) + 511) / 512 * 512;
      live[e.id] = rounded;
      bytes += rounded;
      peak = std::max(peak, bytes);
    } else if (e.action == Action::Free && live.contains(e.id)) {
      bytes -= live[e.id];
      live.erase(e.id);
    }
  }
  return peak;
}

TEST(StaticPlan, RandomTracesGiveValidPlansAtOrAboveTheLowerBound) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<TraceEvent> events;
    std::vector<std::uint64_t> live;
    std::uint64_t next = 1;
    const int steps = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < steps; ++i) {
      if (!live.empty() && rng() % 2 == 0) {
        const std::size_t k = rng() % live.size();
        events.push_back(free_of(live[k]));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        events.push_back(alloc(next, 1 + rng() % (4 << 20)));
        live.push_back(next++);
      }
    }
    const StaticPlan plan = plan_static_arena(events);  // some allocations live to the end
    std::string why;
    ASSERT_TRUE(plan_is_valid(plan, &why)) << "trial " << trial << ": " << why;
    EXPECT_EQ(plan.lower_bound, brute_force_lower_bound(events)) << "trial " << trial;
    EXPECT_GE(plan.arena_bytes, plan.lower_bound) << "trial " << trial;
    std::size_t total = 0;
    for (const auto& a : plan.allocations) total += a.size;
    EXPECT_LE(plan.arena_bytes, total) << "trial " << trial;
  }
}

TEST(StaticPlan, KnownOptimaAreFound) {
  // One after the other: one slot of the largest size serves all.
  const StaticPlan sequential = plan_static_arena({alloc(1, 4096), free_of(1), alloc(2, 1024), free_of(2), alloc(3, 8192), free_of(3)});
  EXPECT_EQ(sequential.arena_bytes, 8192u);
  EXPECT_EQ(sequential.lower_bound, 8192u);
  // All at once: nothing can share.
  const StaticPlan together = plan_static_arena({alloc(1, 4096), alloc(2, 1024), alloc(3, 8192), free_of(1), free_of(2), free_of(3)});
  EXPECT_EQ(together.arena_bytes, 4096u + 1024u + 8192u);
  // A hole left by an early free is reused by a later allocation that fits it: the lower bound.
  const StaticPlan hole = plan_static_arena({alloc(1, 4096), alloc(2, 4096), free_of(1), alloc(3, 4096), free_of(2), free_of(3)});
  EXPECT_EQ(hole.arena_bytes, 8192u);
  EXPECT_EQ(hole.lower_bound, 8192u);
  EXPECT_EQ(plan_static_arena({}).arena_bytes, 0u);
}

TEST(StaticPlan, InvalidPlansAreCaught) {
  StaticPlan plan = plan_static_arena({alloc(1, 4096), alloc(2, 4096), free_of(1), free_of(2)});
  ASSERT_TRUE(plan_is_valid(plan));
  plan.allocations[1].offset = plan.allocations[0].offset;  // both live at once, same bytes
  std::string why;
  EXPECT_FALSE(plan_is_valid(plan, &why));
  EXPECT_NE(why.find("overlap while both live"), std::string::npos) << why;
}

// The recorded H200 ResNet-18 step: the plan's arena against the live-bytes lower bound and
// against what the caching allocator reserved for the same requests.
TEST(StaticPlan, RecordedResNet18StepPlansCloseToItsLowerBound) {
  const auto events = load_trace(std::string(SUBLET_SOURCE_DIR) + "/bench/data/resnet18_bs128_cuda_step.alloc_trace.json");
  const StaticPlan plan = plan_static_arena(events);
  std::string why;
  ASSERT_TRUE(plan_is_valid(plan, &why)) << why;
  const double ratio = static_cast<double>(plan.arena_bytes) / static_cast<double>(plan.lower_bound);
  std::cout << "[ static plan ] ResNet-18 bs128 step: lower bound " << plan.lower_bound / 1048576.0 << " MiB, arena "
            << plan.arena_bytes / 1048576.0 << " MiB (" << ratio << "x, " << plan.heuristic << ")\n";
  EXPECT_LE(ratio, 1.05);
}

// The captured steps `--memory-plan static` recorded on a GPU: the arena is to be within 1% of
// the lower bound.
TEST(StaticPlan, CapturedStepsPlanWithinOnePercentOfTheirLowerBound) {
  for (const char* name : {"resnet18_bs128", "resnet18_bs512", "resnet50_bs64"}) {
    const auto events =
        load_trace(std::string(SUBLET_SOURCE_DIR) + "/bench/data/" + name + "_captured_step.plan_trace.json");
    const StaticPlan plan = plan_static_arena(events);
    std::string why;
    ASSERT_TRUE(plan_is_valid(plan, &why)) << name << ": " << why;
    const double ratio = static_cast<double>(plan.arena_bytes) / static_cast<double>(plan.lower_bound);
    std::cout << "[ static plan ] " << name << " captured step: " << ratio << "x (" << plan.heuristic << ")\n";
    EXPECT_GE(ratio, 1.0) << name;
    EXPECT_LE(ratio, 1.01) << name;
    EXPECT_EQ(plan.tried.size(), static_plan_heuristics().size()) << name << ": every heuristic tried";
  }
}

// Sizes and sums past 2^64 are an error naming the event, never a wrapped figure (five 2^62-byte
// allocations printed a lower bound of 4096 PiB and a negative arena).
TEST(StaticPlan, SizesPast2To64AreAnErrorNamingTheEvent) {
  const std::size_t quarter = std::size_t{1} << 62;
  std::vector<TraceEvent> events;
  for (std::uint64_t i = 0; i < 5; ++i) events.push_back(alloc(i, quarter));
  try {
    plan_static_arena(events);
    ADD_FAILURE() << "five 2^62-byte allocations were planned";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("at event 3 the bytes live at once pass 2^64 bytes"), std::string::npos) << e.what();
  }
  events.resize(3);  // 3 x 2^62 fits: exact figures
  const StaticPlan three = plan_static_arena(events);
  EXPECT_EQ(three.lower_bound, 3 * quarter);
  EXPECT_EQ(three.arena_bytes, 3 * quarter);
  try {
    plan_static_arena({alloc(7, SIZE_MAX)});
    ADD_FAILURE() << "a 2^64-1-byte allocation was planned";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("event 0 (alloc of id 7, 18446744073709551615 bytes): the size rounded up to 512 "
                                         "bytes passes 2^64 bytes"),
              std::string::npos)
        << e.what();
  }
}

// The online best fit as it was written first, scanning every free gap: the reference for the
// ordered-set version, which must place every allocation at the same offset.
std::vector<std::size_t> online_best_fit_by_scan(std::vector<PlannedAllocation> allocations) {
  struct Event { std::size_t at; bool is_free; std::size_t index; };
  std::vector<Event> events;
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    events.push_back({allocations[i].first, false, i});
    events.push_back({allocations[i].last, true, i});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.at != b.at ? a.at < b.at : (a.is_free != b.is_free ? a.is_free : a.index < b.index);
  });
  std::map<std::size_t, std::size_t> gaps;
  std::size_t top = 0;
  for (const Event& e : events) {
    PlannedAllocation& a = allocations[e.index];
    if (e.is_free) {
      std::size_t offset = a.offset, size = a.size;
      auto next = gaps.lower_bound(offset);
      if (next != gaps.end() && next->first == offset + size) size += next->second, next = gaps.erase(next);
      if (next != gaps.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == offset) offset = prev->first, size += prev->second, gaps.erase(prev);
      }
      if (offset + size == top) top = offset;
      else gaps[offset] = size;
      continue;
    }
    auto chosen = gaps.end();
    for (auto it = gaps.begin(); it != gaps.end(); ++it)
      if (it->second >= a.size && (chosen == gaps.end() || it->second < chosen->second)) chosen = it;
    if (chosen == gaps.end()) {
      a.offset = top;
      top += a.size;
    } else {
      a.offset = chosen->first;
      if (chosen->second > a.size) gaps[chosen->first + a.size] = chosen->second - a.size;
      gaps.erase(chosen);
    }
  }
  std::vector<std::size_t> offsets;
  for (const auto& a : allocations) offsets.push_back(a.offset);
  return offsets;
}

TEST(StaticPlan, OnlineBestFitPlacesAsTheScanDid) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<TraceEvent> events;
    std::vector<std::uint64_t> live;
    std::uint64_t next = 1;
    for (int i = 0; i < 400; ++i) {
      if (!live.empty() && rng() % 2 == 0) {
        const std::size_t k = rng() % live.size();
        events.push_back(free_of(live[k]));
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        events.push_back(alloc(next, 512 * (1 + rng() % 64)));  // few sizes: ties between gaps
        live.push_back(next++);
      }
    }
    const StaticPlan plan = plan_static_arena(events, "online best fit");
    ASSERT_TRUE(plan_is_valid(plan)) << "trial " << trial;
    std::vector<std::size_t> offsets;
    for (const auto& a : plan.allocations) offsets.push_back(a.offset);
    EXPECT_EQ(offsets, online_best_fit_by_scan(plan.allocations)) << "trial " << trial;
  }
}

// A 500,000-event trace (PyTorch snapshots of long runs are this long): planned in well under
// 10 s by the O(n log n) parts alone (the offline heuristics, which compare every overlapping
// pair, are left out at this length).
TEST(StaticPlan, LongTracesPlanInLoglinearTime) {
  std::vector<TraceEvent> events;
  std::uint64_t id = 0;
  for (int round = 0; round < 250; ++round) {
    for (int j = 0; j < 1000; ++j) events.push_back(alloc(id + j, 4096));
    for (int j = 0; j < 1000; ++j) events.push_back(free_of(id + j));
    id += 1000;
  }
  const auto start = std::chrono::steady_clock::now();
  const StaticPlan plan = plan_static_arena(events);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(plan.lower_bound, std::size_t{1000} * 4096);
  EXPECT_EQ(plan.arena_bytes, plan.lower_bound);
  EXPECT_EQ(plan.heuristic, "online best fit");
  EXPECT_EQ(plan.tried.size(), 1u);
  EXPECT_TRUE(seconds < 10.0) << seconds << " s";
}

TEST(StaticPlan, AHeuristicCanBeAskedForByName) {
  const auto events =
      load_trace(std::string(SUBLET_SOURCE_DIR) + "/bench/data/resnet18_bs512_captured_step.plan_trace.json");
  const StaticPlan online = plan_static_arena(events, "online best fit");
  EXPECT_EQ(online.heuristic, "online best fit");
  ASSERT_EQ(online.tried.size(), 1u);
  EXPECT_TRUE(plan_is_valid(online));
  EXPECT_GE(online.arena_bytes, plan_static_arena(events).arena_bytes);
  EXPECT_THROW(plan_static_arena(events, "no such heuristic"), ValueError);
}

}  // namespace
}  // namespace sublet::memory
