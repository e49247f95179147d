#pragma once
// The human-readable report: latency table (median ns per pair or per tensor, and the ratio to
// sublet), the tensor rows' runtime overhead over their allocator, the peak-reserved /
// driver-calls table, whether sublet met its goals, and what each column is.
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/alloc/alloc_bench.h"

namespace sublet::bench {

void print_report(const AllocBenchResult& result, std::ostream& out);

struct GoalCheck {
  bool pair_met = false;
  double worst_pair_ns = 0;
  std::size_t worst_pair_size = 0;
  bool churn_met = false;
  double churn_ns = 0;
  bool tensor_measured = false;  // false when every tensor row was skipped (sim)
  bool tensor_met = false;
  double worst_tensor_ns = 0;
  std::string worst_tensor_label;
  // "At least N times faster than X" on every allocator row (pair, churn, replay) where both
  // ran, and separately the least ratio on the tensor rows, which compare whole runtimes (sublet's
  // tensors over X, or at::empty) and carry sublet's own per-tensor cost in both columns;
  // only for the columns this run has (kSpeedupGoals).
  struct Speedup {
    std::string allocator;
    double required = 0;
    double lowest = 0;        // the smallest (X's ns / baseline's ns) over the rows
    std::string lowest_row;   // where it is smallest
    bool met = false;
    double lowest_tensor = 0;  // the same over the tensor rows (infinity when none ran)
    std::string lowest_tensor_row;
  };
  std::vector<Speedup> speedups;
};
// The ratio goals for sublet's caching allocator, checked on --device cuda.
inline const std::vector<std::pair<std::string, double>> kSpeedupGoals = {{"cudaMallocAsync", 10.0}, {"torch", 4.0}};

// Over the baseline's cells; a failed cell misses the goal.
GoalCheck check_goals(const AllocBenchResult& result);

}  // namespace sublet::bench
