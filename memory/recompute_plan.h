#pragma once
// Recomputation under a memory budget (issue 19): which runs of blocks to checkpoint
// (nn::checkpoint) so that a training step's peak fits a budget for the least extra forward time.
// Pure arithmetic over measured numbers; models/resnet_recompute.h measures and applies.
//
// The model. A step's peak is reached when backward starts, with every block's retained bytes
// alive (its activations saved for backward and its output). Checkpointing a run of blocks
// [begin, end) keeps only the run's output (its input is the previous block's output, kept
// anyway), so it saves savings = sum(retained) - output(end - 1); in backward the run is
// recomputed, and its savings are live again while that run's backward runs. Hence
//     peak(S) = baseline_peak - sum_{s in S} savings(s) + max_{s in S} savings(s),
// an upper bound (when run s is recomputed, the runs after it have been freed already).
// Cost: the forward time of every block in a run, once more per step.
//
// The choice is exact for that model up to a savings granularity (savings are rounded down to
// multiples of `granularity_bytes`, so a reported fit holds): for each cap on the largest run's
// savings, a dynamic programme over the blocks finds the cheapest set of runs whose savings
// cover baseline_peak + cap - budget. Runs never cross groups (a group is one nn::Sequential).
#include <cstddef>
#include <string>
#include <vector>

namespace sublet::memory {

struct RecomputeUnit {
  std::string name;                // e.g. "layer1.0"
  int group = 0;                   // runs stay within one group; units of a group are adjacent
  std::size_t retained_bytes = 0;  // bytes its forward leaves allocated (saved activations + output)
  std::size_t output_bytes = 0;
  double forward_ms = 0;
};

struct RecomputeRun {
  std::size_t begin = 0, end = 0;  // units [begin, end)
  bool operator==(const RecomputeRun&) const = default;
};

struct RecomputeChoice {
  std::vector<RecomputeRun> runs;   // in unit order, disjoint
  std::size_t predicted_peak = 0;   // by the model above
  double recompute_ms = 0;          // extra forward time per step
  bool fits = false;                // predicted_peak <= budget; when false, `runs` is the
                                    // choice with the smallest predicted peak
};

std::size_t run_savings(const std::vector<RecomputeUnit>& units, const RecomputeRun& run);
std::size_t predicted_peak(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak,
                           const std::vector<RecomputeRun>& runs);

// The cheapest choice that fits `budget` (fewest extra milliseconds; the lower peak on ties), or
// the choice of the smallest peak with fits = false.
RecomputeChoice choose_recompute(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak, std::size_t budget);

// "6GiB", "512MiB", "1.5GB", "1048576" (bytes), or a fraction in (0, 1] of `measured_peak`
// ("0.5"). ValueError naming the text otherwise.
struct MemoryBudget {
  std::size_t bytes = 0;
  double fraction = 0;  // > 0 when given as a fraction
};
MemoryBudget parse_memory_budget(const std::string& text);
std::size_t resolve_budget(const MemoryBudget& budget, std::size_t measured_peak);

}  // namespace sublet::memory
