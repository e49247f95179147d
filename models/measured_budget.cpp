#include "models/measured_budget.h"

#include <cmath>

#include "core/errors.h"
#include "core/json_excerpt.h"
#include "models/resnet_recompute.h"

namespace sublet::models {

MeasuredBudgetInput measured_budget_from_json(const nlohmann::json& report, const std::string& source) {
  const nlohmann::json& bench = report.is_array() && report.size() == 1 ? report[0] : report;
  if (!bench.is_object() || !bench.contains("memory_budget") || !bench["memory_budget"].is_object())
    throw ValueError(source + ": expected the JSON of `sublet bench step --memory-budget ... --json`, which has a "
                     "\"memory_budget\" object; found none");
  const nlohmann::json& measured = bench["memory_budget"];
  for (const char* key : {"units", "baseline_peak_bytes", "forward_ms"})
    if (!measured.contains(key)) throw ValueError(source + ": memory_budget lacks the field \"" + std::string(key) + "\"");
  MeasuredBudgetInput in;
  in.units = units_from_json(measured["units"]);
  const nlohmann::json& peak = measured["baseline_peak_bytes"];
  // Negative or huge values would wrap in the planner's sums: refused with the value found.
  if (!peak.is_number_unsigned() || peak.get<std::uint64_t>() == 0 || peak.get<std::uint64_t>() > kMaxRecomputeBytes)
    throw ValueError(source + ": memory_budget.baseline_peak_bytes: expected a byte count from 1 to 2^50, found " +
                     json_excerpt(peak));
  in.baseline_peak = static_cast<std::size_t>(peak.get<std::uint64_t>());
  const nlohmann::json& forward = measured["forward_ms"];
  if (!forward.is_number() || !(forward.get<double>() >= 0) || !std::isfinite(forward.get<double>()))
    throw ValueError(source + ": memory_budget.forward_ms: expected a number >= 0, found " + json_excerpt(forward));
  in.forward_ms = forward.get<double>();
  if (const auto it = bench.find("model"); it != bench.end() && it->is_string()) in.model = it->get<std::string>();
  if (const auto it = bench.find("batch_size"); it != bench.end() && it->is_number_integer()) in.batch_size = it->get<std::int64_t>();
  return in;
}

}  // namespace sublet::models
