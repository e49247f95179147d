#pragma once
// What `sublet plan --recompute` reads: the "memory_budget" object that `sublet bench step
// --memory-budget ... --json` writes (the measured blocks, the peak with nothing recomputed, the
// forward time). The file is the user's: every number is checked before the planner sees it.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/step/recompute_plan.h"

namespace sublet::models {

// Bounds on the measured input: with at most this many units of at most this many bytes each,
// every sum the planner forms fits 64 bits.
inline constexpr std::size_t kMaxRecomputeUnits = 1000;
inline constexpr std::size_t kMaxRecomputeBytes = std::size_t{1} << 50;

struct MeasuredBudgetInput {
  std::vector<RecomputeUnit> units;
  std::size_t baseline_peak = 0;  // from 1 to kMaxRecomputeBytes
  double forward_ms = 0;
  std::string model;              // the report's "model" and "batch_size", for titles
  std::int64_t batch_size = 0;
};

// `report` is the bench step report or a one-element list of it. ValueError naming `source`
// and the field for anything missing, negative, out of range or of the wrong type (values shown
// a few levels deep at most: core/json_excerpt.h).
MeasuredBudgetInput measured_budget_from_json(const nlohmann::json& report, const std::string& source);

}  // namespace sublet::models
