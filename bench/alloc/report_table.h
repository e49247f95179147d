#pragma once
// The human-readable report: latency table (median ns per pair or per tensor, and the ratio to
// sublet), the tensor rows' runtime overhead over their allocator, the peak-reserved /
// driver-calls table, whether sublet met its goals, and what each column is.
#include <ostream>
#include <string>

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
};
// Over the baseline's cells; a failed cell misses the goal.
GoalCheck check_goals(const AllocBenchResult& result);

}  // namespace sublet::bench
