#pragma once
// Times a workload in batches with std::chrono::steady_clock and summarises the per-batch
// nanoseconds per pair. The median of batches (not the mean of all pairs) keeps one page fault,
// one preemption or one driver hiccup from moving the result.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sublet::bench {

struct BatchPlan {
  std::size_t warmup_batches = 1;  // run untimed first: segments made, caches and TLBs warm
  std::size_t max_batches = 1;     // stop after this many timed batches ...
  std::size_t min_batches = 1;     // ... or once max_seconds have passed and at least this many ran
  double max_seconds = 1.0;
};

struct Timing {
  double median_ns = 0;  // per pair, median over batches
  double p10_ns = 0;
  double p90_ns = 0;
  std::uint64_t pairs_timed = 0;
  std::size_t batches = 0;
};

// The median of `values` (an even count averages the middle two); 0 for none.
double median_of(std::vector<double> values);

// Nearest-rank percentile of sorted values; the median of an even count averages the middle two.
Timing summarise_batches(std::vector<double> ns_per_pair, std::uint64_t pairs_timed);

// run_batch(index) does one batch (warm-up batches get indexes first) and returns the number of
// pairs it did (> 0).
template <typename RunBatch>
Timing time_batches(RunBatch&& run_batch, const BatchPlan& plan) {
  using Clock = std::chrono::steady_clock;
  std::size_t index = 0;
  for (; index < plan.warmup_batches; ++index) run_batch(index);
  std::vector<double> ns_per_pair;
  ns_per_pair.reserve(plan.max_batches);
  std::uint64_t pairs_timed = 0;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(plan.max_seconds));
  while (ns_per_pair.size() < plan.max_batches) {
    const auto start = Clock::now();
    const std::size_t pairs = run_batch(index++);
    const auto end = Clock::now();
    ns_per_pair.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()) /
                          static_cast<double>(pairs));
    pairs_timed += pairs;
    if (ns_per_pair.size() >= plan.min_batches && end >= deadline) break;
  }
  return summarise_batches(std::move(ns_per_pair), pairs_timed);
}

}  // namespace sublet::bench
