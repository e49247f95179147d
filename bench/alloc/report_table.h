#pragma once
// The human-readable report: latency table (median ns per pair and the ratio to sublet), the
// peak-reserved / driver-calls table, whether sublet met its goals, and what each column is.
#include <ostream>

#include "bench/alloc/alloc_bench.h"

namespace sublet::bench {

void print_report(const AllocBenchResult& result, std::ostream& out);

struct GoalCheck {
  bool pair_met = false;
  double worst_pair_ns = 0;
  std::size_t worst_pair_size = 0;
  bool churn_met = false;
  double churn_ns = 0;
};
// Over the baseline's cells; a failed cell misses the goal.
GoalCheck check_goals(const AllocBenchResult& result);

}  // namespace sublet::bench
