#pragma once
// A static memory plan for a recorded step: every allocation of the trace gets an offset in one
// arena, chosen offline, such that no two allocations live at the same time overlap. The trace
// repeats exactly in a captured (CUDA-graph) step, so such a plan could serve every replay from
// one block. Reported beside it: the lower bound, the most bytes
// live at one moment, which no placement can beat.
//
// Heuristics (the smallest arena is kept; every one's arena is reported):
//  - greedy by size (TFLite's): largest first, each at the lowest offset free of the placed
//    allocations whose lifetimes intersect its own;
//  - best fit by size (XLA's heap simulator): largest first, each in the smallest gap that holds it;
//  - greedy by breadth (TFLite's): allocations live at the busiest moments first;
//  - greedy by lifetime: longest-lived first, lowest offset;
//  - online best fit: in request order, each in the smallest free gap of the arena at that moment
//    (the caching allocator's rule within one growing segment): a freed block's bytes serve the
//    next request that fits, as the cache does, which keeps recently written memory in use;
//  - iterated (greedy by size, best fit by size, greedy by breadth, greedy by lifetime): the
//    placement again and again (64 rounds at most), each time with the allocations that ever ended
//    above the lower bound placed first (most often first), which closes most of the gap the
//    single passes leave to the bound on recorded ResNet steps. Only for traces of at most
//    4,000 allocations (a captured step), whose placement is cheap.
// Sizes round up to 512 B as the caching allocator rounds them. The offline heuristics are
// O(n^2) in the allocations (each meets every allocation whose lifetime meets its own): they run
// for traces of at most 20,000 allocations (one step's trace has thousands); longer traces get
// the lower bound and the online best fit only, both O(n log n). A size or sum past 2^64 bytes
// is a ValueError naming the event.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/replay.h"

namespace sublet::memory {

struct PlannedAllocation {
  std::uint64_t id = 0;        // the trace's id
  std::size_t size = 0;        // rounded to 512 B
  std::size_t first = 0;       // index of its alloc event
  std::size_t last = 0;        // index of its free event (the trace's end when never freed)
  std::size_t offset = 0;      // in the arena
};

struct StaticPlan {
  std::vector<PlannedAllocation> allocations;
  std::size_t lower_bound = 0;   // most bytes live at one moment (rounded sizes)
  std::size_t arena_bytes = 0;   // the plan's arena: the highest offset + size
  std::string heuristic;         // the one that gave the smallest arena (or the one asked for)
  std::vector<std::pair<std::string, std::size_t>> tried;  // every heuristic's arena, in the order tried
};

// The heuristics' names, for plan_static_arena's `heuristic`.
const std::vector<std::string>& static_plan_heuristics();

// Plans the allocations of `events` (empty_cache and peak-reset markers are ignored). `heuristic`
// empty: the smallest arena of all; else that heuristic's plan (ValueError for an unknown name).
StaticPlan plan_static_arena(const std::vector<TraceEvent>& events, const std::string& heuristic = "");

// True when no two allocations whose lifetimes intersect share a byte; `why` names the first pair.
bool plan_is_valid(const StaticPlan& plan, std::string* why = nullptr);

}  // namespace sublet::memory
