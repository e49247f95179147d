#include "bench/alloc/batch_timer.h"

#include <cmath>

namespace sublet::bench {
namespace {
double nearest_rank(const std::vector<double>& sorted, double fraction) {
  const auto rank = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}
double median_of_sorted(const std::vector<double>& sorted) {
  const std::size_t n = sorted.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}
}  // namespace

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return median_of_sorted(values);
}

Timing summarise_batches(std::vector<double> ns_per_pair, std::uint64_t pairs_timed) {
  Timing t;
  t.batches = ns_per_pair.size();
  t.pairs_timed = pairs_timed;
  if (ns_per_pair.empty()) return t;
  std::sort(ns_per_pair.begin(), ns_per_pair.end());
  t.median_ns = median_of_sorted(ns_per_pair);
  t.p10_ns = nearest_rank(ns_per_pair, 0.10);
  t.p90_ns = nearest_rank(ns_per_pair, 0.90);
  return t;
}

}  // namespace sublet::bench
