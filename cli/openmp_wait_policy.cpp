#include "cli/openmp_wait_policy.h"

namespace sublet::cli {

std::optional<std::pair<std::string, std::string>> openmp_wait_default(const EnvironmentLookup& lookup) {
  if (lookup(kWaitPolicyVariable).has_value() || lookup(kSpinCountVariable).has_value()) return std::nullopt;
  return std::make_pair(std::string(kSpinCountVariable), std::string(kDefaultSpinCount));
}

OpenMpWaitReport openmp_wait_report(const EnvironmentLookup& lookup) {
  OpenMpWaitReport report;
  report.wait_policy = lookup(kWaitPolicyVariable).value_or("");
  report.spin_count = lookup(kSpinCountVariable).value_or("");
  if (report.wait_policy.empty() && report.spin_count == kDefaultSpinCount) {
    report.description = std::string("sublet's default: spin ") + kDefaultSpinCount + " rounds, then sleep";
  } else if (report.wait_policy.empty() && report.spin_count.empty()) {
    report.description = "libgomp's default (this program was not started through the sublet command)";
  } else {
    report.description = "from the environment";
  }
  return report;
}

}  // namespace sublet::cli
