// Replaying a recorded history on the simulated backend: exact with the recording's settings,
// and a what-if tool for other knobs and capacities.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <fstream>
#include <random>
#include <vector>

#include "tests/memory/alloc_test_support.h"
#include "core/errors.h"
#include "analysis/replay.h"

using namespace sublet::memory;
using sublet::memory::testing::SimulatedAllocator;

namespace {

// A workload with growing and shrinking tensors, like a training step's activations.
void run_workload(CachingAllocator& allocator) {
  std::mt19937_64 rng(42);
  std::vector<Block*> live;
  for (int step = 0; step < 400; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t i = rng() % live.size();
      allocator.free(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      live.push_back(allocator.allocate((std::size_t{1} << (9 + rng() % 17)) + rng() % 100000));
    }
  }
  for (Block* b : live) allocator.free(b);
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + name; }

}  // namespace

TEST(Replay, ReproducesTheLiveRunsPeakReservedExactly) {
  SimulatedAllocator live(std::size_t{64} << 30);
  AllocationHistory history;
  history.attach(live.allocator);
  run_workload(live.allocator);
  const auto trace = trace_from_history(history.events());
  ASSERT_GT(trace.size(), 300u);
  const ReplayResult replayed = replay_trace(trace, "", std::size_t{64} << 30);
  EXPECT_EQ(replayed.peak_reserved, live.allocator.max_memory_reserved());
  EXPECT_EQ(replayed.peak_allocated, live.allocator.max_memory_allocated());
  EXPECT_EQ(replayed.device_allocs, live.stat("num_device_alloc"));
  EXPECT_FALSE(replayed.out_of_memory);
  // The waste split at the reserved peak too, kind by kind.
  const WasteSplit at_peak = live.allocator.waste_at_peak();
  ASSERT_TRUE(replayed.has_waste_at_peak);
  EXPECT_EQ(replayed.waste_at_peak.reserved, at_peak.reserved);
  EXPECT_EQ(replayed.waste_at_peak.requested, at_peak.requested);
  EXPECT_EQ(replayed.waste_at_peak.rounding, at_peak.rounding);
  EXPECT_EQ(replayed.waste_at_peak.holes.all(), at_peak.holes.all());
  EXPECT_EQ(replayed.waste_at_peak.free_segments.all(), at_peak.free_segments.all());
  EXPECT_TRUE(at_peak.holes.all() > 0) << "the workload leaves holes at its peak";
}

TEST(Replay, OtherKnobsChangeTheAnswer) {
  SimulatedAllocator live(std::size_t{64} << 30);
  AllocationHistory history;
  history.attach(live.allocator);
  run_workload(live.allocator);
  const auto trace = trace_from_history(history.events());
  const ReplayResult base = replay_trace(trace, "", std::size_t{64} << 30);
  const ReplayResult expandable = replay_trace(trace, "expandable_segments:True", std::size_t{64} << 30);
  EXPECT_LT(expandable.peak_reserved, base.peak_reserved);
  const ReplayResult tiny = replay_trace(trace, "", base.peak_allocated / 2);
  EXPECT_TRUE(tiny.out_of_memory);
  EXPECT_LT(tiny.events_replayed, trace.size());
  EXPECT_NE(tiny.oom_message.find("out of memory"), std::string::npos);
  EXPECT_THROW(replay_trace(trace, "bogus:1", std::size_t{1} << 30), sublet::ConfigError);
}

TEST(Replay, EmptyCacheAndPeakResetsOfTheRunAreReplayedToo) {
  // A run that empties its cache after a large transient phase and then measures its steady part
  // from a peak reset, as `sublet bench step` does after the cuDNN benchmark and the warm-up.
  SimulatedAllocator live(std::size_t{64} << 30);
  AllocationHistory history;
  history.attach(live.allocator);
  Block* transient = live.allocator.allocate(std::size_t{2} << 30);
  live.allocator.free(transient);
  live.allocator.empty_cache();
  live.allocator.reset_peak_memory_stats();
  run_workload(live.allocator);
  const auto trace = trace_from_history(history.events());
  ASSERT_EQ(trace[2].action, TraceEvent::Action::EmptyCache);
  ASSERT_EQ(trace[3].action, TraceEvent::Action::ResetPeaks);
  const ReplayResult replayed = replay_trace(trace, "", std::size_t{64} << 30);
  EXPECT_EQ(replayed.peak_reserved, live.allocator.max_memory_reserved());
  EXPECT_EQ(replayed.peak_allocated, live.allocator.max_memory_allocated());
  EXPECT_LT(replayed.peak_allocated, std::size_t{2} << 30);  // the transient phase came before the reset
}

// The recorded H200 ResNet-18 step (bench/data/README.md): replayed with the run's settings, the
// simulated allocator must reach the peaks the GPU run measured, 182.24 MiB allocated and 192 MiB
// reserved. A change of placement that moves these is a change of the allocator's behaviour on a
// real training step: re-record the trace on the GPU and update the figures with the reason.
TEST(Replay, RecordedResNet18StepReplaysToTheMeasuredPeaks) {
  const std::string path = std::string(SUBLET_SOURCE_DIR) + "/bench/data/resnet18_bs128_cuda_step.alloc_trace.json";
  const auto trace = load_trace(path);
  const ReplayResult replayed = replay_trace(trace, "expandable_segments:True", std::size_t{141} << 30);
  EXPECT_EQ(replayed.peak_reserved, 192 * kMiB);
  EXPECT_NEAR(static_cast<double>(replayed.peak_allocated) / kMiB, 182.24, 0.005);
  EXPECT_FALSE(replayed.out_of_memory);
  std::size_t workspaces = 0;
  for (const TraceEvent& e : trace) workspaces += e.action == TraceEvent::Action::Alloc && e.category == BlockCategory::Workspace;
  EXPECT_GT(workspaces, 1000u);  // cuDNN and cuBLAS workspaces are tagged in the trace
}

TEST(Replay, TraceKeepsTheCategoryABlockEndedWith) {
  SimulatedAllocator live(std::size_t{1} << 30);
  AllocationHistory history;
  history.attach(live.allocator);
  Block* saved = live.allocator.allocate(4096);  // allocated untagged, as a forward output
  Block* workspace = live.allocator.allocate(8192, nullptr, BlockCategory::Workspace);
  live.allocator.set_category(saved, BlockCategory::Activation);  // then saved for backward
  live.allocator.free(workspace);
  live.allocator.free(saved);
  const auto trace = trace_from_history(history.events());
  ASSERT_EQ(trace.size(), 4u);
  EXPECT_EQ(trace[0].category, BlockCategory::Activation);
  EXPECT_EQ(trace[1].category, BlockCategory::Workspace);
}

// frag@peak is taken when allocated memory peaks (the moment sublet profile calls the peak), not
// when reserved memory last grew: here the reserved peak (a new 12 MiB segment while a 4 MiB hole
// and an 8 MiB tail are free: 33%) comes before the allocated peak (the 12 MiB segment reused, only
// the 8 MiB tail free: 0%).
TEST(Replay, FragmentationIsTakenWhereAllocatedMemoryPeaks) {
  using Action = TraceEvent::Action;
  const auto alloc = [](std::uint64_t id, std::size_t mib) { return TraceEvent{.action = Action::Alloc, .id = id, .size = mib * kMiB}; };
  const auto free_of = [](std::uint64_t id) { return TraceEvent{.action = Action::Free, .id = id}; };
  const std::vector<TraceEvent> events = {alloc(1, 4), alloc(2, 4), alloc(3, 4), free_of(2),  // a 4 MiB hole, 8 MiB tail
                                          alloc(4, 12),                                        // reserved peak: 32 MiB
                                          free_of(4), alloc(5, 4), alloc(6, 12)};              // allocated peak: 24 MiB
  const ReplayResult r = replay_trace(events, "", std::size_t{1} << 30);
  EXPECT_EQ(r.peak_reserved, 32 * kMiB);
  EXPECT_EQ(r.peak_allocated, 24 * kMiB);
  EXPECT_EQ(r.fragmentation_at_peak, 0.0);  // 1/3 would be the reserved peak's
}

TEST(Replay, WasteIsSplitAtTheReservedPeak) {
  using Action = TraceEvent::Action;
  const auto alloc = [](std::uint64_t id, std::size_t mib) { return TraceEvent{.action = Action::Alloc, .id = id, .size = mib * kMiB}; };
  const auto free_of = [](std::uint64_t id) { return TraceEvent{.action = Action::Free, .id = id}; };
  // A 20 MiB segment holds 1 and 3 around a 4 MiB hole and an 8 MiB free tail; 4 takes its own 12 MiB.
  const std::vector<TraceEvent> events = {alloc(1, 4), alloc(2, 4), alloc(3, 4), free_of(2), alloc(4, 12), free_of(4)};
  const ReplayResult r = replay_trace(events, "", std::size_t{1} << 30);
  ASSERT_TRUE(r.has_waste_at_peak);
  EXPECT_EQ(r.waste_at_peak.reserved, 32 * kMiB);
  EXPECT_EQ(r.waste_at_peak.requested, 20 * kMiB);
  EXPECT_EQ(r.waste_at_peak.holes.large_pool, 12 * kMiB);
  EXPECT_EQ(r.waste_at_peak.rounding + r.waste_at_peak.free_segments.all() + r.waste_at_peak.mapped_unused, 0u);
}

TEST(Replay, TraceFilesRoundTripAndBadOnesAreRejected) {
  using Action = TraceEvent::Action;
  const std::vector<TraceEvent> events = {{.action = Action::Alloc, .category = BlockCategory::Gradient, .id = 1, .size = 4096},
                                          {.action = Action::Alloc, .id = 2, .size = 3 * kMiB, .stream = 7},
                                          {.action = Action::Free, .id = 1},
                                          {.action = Action::EmptyCache},
                                          {.action = Action::ResetPeaks},
                                          {.action = Action::Free, .id = 2}};
  const std::string path = temp_path("trace.json");
  save_trace(path, events);
  const auto loaded = load_trace(path);
  ASSERT_EQ(loaded.size(), events.size());
  EXPECT_EQ(loaded[0].category, BlockCategory::Gradient);
  EXPECT_EQ(loaded[1].category, BlockCategory::Unknown);
  EXPECT_EQ(loaded[1].size, 3 * kMiB);
  EXPECT_EQ(loaded[1].stream, 7u);
  EXPECT_EQ(loaded[2].action, TraceEvent::Action::Free);
  EXPECT_EQ(loaded[3].action, TraceEvent::Action::EmptyCache);
  EXPECT_EQ(loaded[4].action, TraceEvent::Action::ResetPeaks);
  EXPECT_EQ(loaded[5].id, 2u);

  const auto write = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      load_trace(path);
    } catch (const sublet::IoError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(write("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(write(R"([{"action":"free","id":3}])").find("event 0: free of id 3"), std::string::npos);
  EXPECT_NE(write(R"([{"action":"alloc","id":1}])").find("needs a non-negative integer \"size\""), std::string::npos);
  EXPECT_NE(write(R"([{"action":"grow","id":1,"size":5}])").find("unknown action 'grow'"), std::string::npos);
  EXPECT_NE(write(R"([{"action":"free"}])").find("event 0: a \"free\" event needs"), std::string::npos);
  EXPECT_NE(write(R"([{"action":"alloc","id":1,"size":5,"category":"weights"}])").find("unknown \"category\" \"weights\""),
            std::string::npos);
  EXPECT_NE(write(R"({"format":"sublet-alloc-trace","version":3,"events":[]})").find("version 3 is not one this build reads"),
            std::string::npos);
  EXPECT_EQ(write(R"({"format":"sublet-alloc-trace","version":1,"events":[{"action":"alloc","id":1,"size":5}]})"), "accepted");
  EXPECT_NE(write(R"({"format":"other"})").find("sublet-alloc-trace"), std::string::npos);
  // The streaming reader: keys in any order, unknown keys (nested values too) ignored, values of
  // the wrong type or shape named with their event.
  EXPECT_EQ(write(R"({"events":[{"size":5,"extra":{"a":[1,2]},"id":1,"action":"alloc"}],"version":2,"format":"sublet-alloc-trace","note":[{}]})"),
            "accepted");
  EXPECT_NE(write(R"([{"action":"alloc","id":"1","size":5}])").find("event 0: a \"alloc\" event needs a non-negative integer \"id\""),
            std::string::npos);
  EXPECT_NE(write(R"([{"action":"alloc","id":1,"size":[5]}])").find("event 0: an alloc needs"), std::string::npos);
  EXPECT_NE(write(R"([{"action":"alloc","id":1,"size":5},7])").find("event 1: expected {\"action\""), std::string::npos);
  EXPECT_NE(write(R"([{"action":"alloc","id":1,"size":5},[]])").find("event 1: expected {\"action\""), std::string::npos);
  EXPECT_NE(write(R"({"format":"sublet-alloc-trace","version":2,"events":{}})").find("expected an \"events\" list"),
            std::string::npos);
  EXPECT_NE(write(R"({"format":"sublet-alloc-trace","version":2})").find("expected an \"events\" list"), std::string::npos);
  EXPECT_NE(write("42").find("expected a trace object or a list of events"), std::string::npos);
  EXPECT_NE(write(R"([{"action":"alloc","id":1,"size":5}, )").find("not valid JSON"), std::string::npos);
  EXPECT_NE(write(R"([{"action":"alloc","id":1,"size":5},{"action":"alloc","id":1,"size":5}])").find("event 1: id 1 allocated twice"),
            std::string::npos);
  std::remove(path.c_str());
  EXPECT_THROW(load_trace(path), sublet::IoError);
}

namespace {

// The replay as it was before fragmentation was read lazily: at every allocation that reaches
// the peak. The reference the lazy reading must match exactly.
double eager_fragmentation_at_peak(const std::vector<TraceEvent>& events, const std::string& conf, std::size_t capacity) {
  CachingAllocator allocator(std::make_unique<SimulatedBackend>(capacity), AllocatorConfig::parse(conf));
  std::unordered_map<std::uint64_t, Block*> live;
  std::size_t peak_seen = 0;
  double fragmentation = 0;
  for (const TraceEvent& e : events) {
    if (e.action == TraceEvent::Action::Free) {
      if (auto it = live.find(e.id); it != live.end()) allocator.free(it->second), live.erase(it);
    } else if (e.action == TraceEvent::Action::Alloc) {
      try {
        live[e.id] = allocator.allocate(e.size, reinterpret_cast<sublet::StreamHandle>(static_cast<std::uintptr_t>(e.stream)));
      } catch (const sublet::OutOfMemoryError&) {
        break;
      }
      if (allocator.memory_allocated() >= peak_seen) peak_seen = allocator.memory_allocated(), fragmentation = allocator.fragmentation();
    }
  }
  for (auto& [id, block] : live) allocator.free(block);
  return fragmentation;
}

std::vector<TraceEvent> random_trace(std::uint64_t seed, std::size_t events, std::uint64_t streams) {
  std::mt19937_64 rng(seed);
  std::vector<TraceEvent> trace;
  std::vector<std::uint64_t> live;
  std::uint64_t next = 1;
  for (std::size_t i = 0; i < events; ++i) {
    if (!live.empty() && rng() % 5 < 2) {
      const std::size_t k = rng() % live.size();
      trace.push_back({.action = TraceEvent::Action::Free, .id = live[k]});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      trace.push_back({.action = TraceEvent::Action::Alloc, .id = next, .size = (std::size_t{1} << (9 + rng() % 16)) + rng() % 5000,
                       .stream = rng() % streams});
      live.push_back(next++);
    }
  }
  return trace;
}

}  // namespace

// Fragmentation at the peak is read once per peak, not at every allocation (a trace that only
// grows was quadratic): the figure is the same as reading it every time, also for rows that run
// out of memory, on random traces of several streams and settings.
TEST(Replay, FragmentationReadOncePerPeakMatchesReadingItEveryTime) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const std::vector<TraceEvent> trace = random_trace(seed, 3000, 1 + seed % 3);
    for (const std::string conf : {"", "max_split_size_mb:64", "expandable_segments:True"}) {
      for (const std::size_t capacity : {std::size_t{1} << 40, std::size_t{600} << 20}) {
        const ReplayResult r = replay_trace(trace, conf, capacity);
        const double expected = eager_fragmentation_at_peak(trace, conf, capacity);
        EXPECT_TRUE(r.fragmentation_at_peak == expected)
            << "seed " << seed << " conf '" << conf << "' capacity " << capacity << ": " << r.fragmentation_at_peak
            << " vs " << expected << (r.out_of_memory ? " (OOM)" : "");
      }
    }
  }
}

// The peak comes just before a request that runs out of memory, whose out-of-memory path first
// releases a cached segment: the fragmentation reported is the peak's (0.583), read before the
// release, not the state after it (0.43).
TEST(Replay, FragmentationOfAPeakBeforeAnOutOfMemoryIsReadBeforeTheRelease) {
  using Action = TraceEvent::Action;
  const auto alloc = [](std::uint64_t id, std::size_t mib, std::uint64_t stream) {
    return TraceEvent{.action = Action::Alloc, .id = id, .size = mib * kMiB, .stream = stream};
  };
  const std::vector<TraceEvent> events = {
      alloc(1, 4, 0), alloc(2, 4, 1), alloc(3, 4, 2),  // three 20 MiB segments, one per stream
      {.action = Action::Free, .id = 3},              // the third is cached, wholly free
      alloc(4, 4, 0),                                 // the peak again (12 MiB), inside the first
      alloc(5, 40, 0)};                               // 40 MiB more than 64 MiB holds: the cache is released, then OOM
  const ReplayResult r = replay_trace(events, "", 64 * kMiB);
  ASSERT_TRUE(r.out_of_memory);
  EXPECT_EQ(r.oom_event, 5u);
  EXPECT_TRUE(std::abs(r.fragmentation_at_peak - (1.0 - 20.0 / 48.0)) < 1e-12) << r.fragmentation_at_peak;
  EXPECT_TRUE(r.fragmentation_at_peak == eager_fragmentation_at_peak(events, "", 64 * kMiB));
}

// 10^5 streams, each allocating once: streams are found by hash and hold their bins by page, so
// this takes well under a second (a scan over a list of streams would take minutes).
TEST(Replay, ManyStreamsReplayInLinearTime) {
  std::vector<TraceEvent> trace;
  const std::uint64_t streams = 100000;
  for (std::uint64_t i = 0; i < streams; ++i)
    trace.push_back({.action = TraceEvent::Action::Alloc, .id = i, .size = 1000, .stream = i});
  for (std::uint64_t i = 0; i < streams; ++i) trace.push_back({.action = TraceEvent::Action::Free, .id = i});
  const auto start = std::chrono::steady_clock::now();
  const ReplayResult r = replay_trace(trace, "", std::size_t{1} << 40);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.out_of_memory);
  EXPECT_EQ(r.peak_allocated, streams * 1024);  // 1000 B rounds up to 1024 B; each stream gets a 2 MiB segment
  EXPECT_EQ(r.peak_reserved, streams * (std::size_t{2} << 20));
  EXPECT_EQ(r.device_allocs, static_cast<std::int64_t>(streams));
  EXPECT_TRUE(seconds < 10.0) << seconds << " s";
}
