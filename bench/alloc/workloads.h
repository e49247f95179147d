#pragma once
// The three workloads, each timed on one allocator (a fresh one per call):
//  - pair:   allocate(size) then free, over and over;
//  - churn:  64 live blocks of log-uniform random sizes in [512 B, 16 MiB]; each step frees one
//            block chosen at random and allocates a new one in its place (seeded, so every
//            allocator sees the same sequence);
//  - replay: a recorded history, pass after pass; blocks left live at the end of a pass are
//            freed at its end (timed: each alloc is one pair) so every pass starts the same.
// A "pair" is one allocate plus one free; results are nanoseconds per pair.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench/alloc/allocator_under_test.h"
#include "bench/alloc/batch_timer.h"
#include "bench/alloc/history.h"

namespace sublet::bench {

// How many pairs to time for pair and churn, in batches of batch_pairs.
struct PairPlan {
  std::size_t warmup_pairs = 1000;
  std::size_t timed_pairs = 100000;  // at most; fewer when max_seconds runs out first
  std::size_t batch_pairs = 200;
  std::size_t min_batches = 5;
  double max_seconds = 1.0;
};

struct ChurnSequence {
  struct Step {
    std::uint32_t slot;  // the live block freed and replaced
    std::size_t size;    // the size allocated in its place
  };
  std::vector<std::size_t> initial_sizes;  // one per live block
  std::vector<Step> steps;
  std::uint64_t peak_live_bytes = 0;
};

inline constexpr std::size_t kChurnLiveBlocks = 64;
inline constexpr std::size_t kChurnMinSize = 512;
inline constexpr std::size_t kChurnMaxSize = 16 * 1024 * 1024;

// The batches a plan asks for: warm-up pairs and timed pairs rounded up to whole batches.
BatchPlan batch_plan_for(const PairPlan& plan);

// Deterministic for a seed (std::mt19937_64); sizes log-uniform in [kChurnMinSize, kChurnMaxSize].
ChurnSequence make_churn_sequence(std::uint64_t seed, std::size_t steps);

Timing time_pair(AllocatorUnderTest& allocator, std::size_t bytes, const PairPlan& plan);
// `sequence` must hold at least plan.warmup_pairs + plan.timed_pairs steps.
Timing time_churn(AllocatorUnderTest& allocator, const ChurnSequence& sequence, const PairPlan& plan);
// One batch is one pass over the history; passes as many as plan.timed_pairs allows (at least
// plan.min_batches, at most until max_seconds), after one warm-up pass.
Timing time_replay(AllocatorUnderTest& allocator, const ReplayHistory& history, const PairPlan& plan);

}  // namespace sublet::bench
