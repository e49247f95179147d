#pragma once
// The budget-versus-time curve of recomputation: for each memory budget, the extra
// forward time per step of the cheapest runs of blocks to recompute that fit it (`sublet plan
// --recompute ... --svg`). Budgets nothing fits are drawn as crosses at the top.
#include <cstddef>
#include <string>
#include <vector>

namespace sublet::profile {

struct RecomputeCurvePoint {
  std::size_t budget_bytes = 0;
  bool fits = false;
  std::size_t predicted_peak = 0;
  double recompute_ms = 0;
  std::string recomputed;  // the runs, for the point's tooltip
};

// baseline_peak: the peak with nothing recomputed; forward_ms: the measured forward (the y axis
// also reads as a share of it).
std::string recompute_curve_svg(const std::string& title, const std::vector<RecomputeCurvePoint>& points,
                                std::size_t baseline_peak, double forward_ms);

}  // namespace sublet::profile
