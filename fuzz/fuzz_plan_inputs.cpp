// Arbitrary bytes as the two JSON inputs of `sublet plan`: a --recompute report (measured blocks
// and baseline) planned for every budget the command tries, and a sublet-alloc-trace planned as
// a static arena and replayed under PyTorch's rules. A result or a ValueError/IoError naming the
// input, never a crash, a hang, a wrapped size or another exception.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "analysis/pytorch_rules.h"
#include "analysis/recompute_plan.h"
#include "analysis/replay.h"
#include "analysis/static_plan.h"
#include "core/errors.h"
#include "models/measured_budget.h"
#include "models/resnet_recompute.h"

namespace {

void plan_recompute(std::string_view text) {
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return;
  }
  sublet::models::MeasuredBudgetInput in;
  try {
    in = sublet::models::measured_budget_from_json(report, "input");
  } catch (const sublet::ValueError&) {
    return;
  }
  for (double fraction : {0.9, 0.5, 0.3}) {
    const auto budget = static_cast<std::size_t>(fraction * static_cast<double>(in.baseline_peak));
    try {
      const auto choice = sublet::memory::choose_recompute(in.units, in.baseline_peak, budget);
      if (choice.fits && choice.predicted_peak > budget) std::abort();
    } catch (const sublet::ValueError&) {
    }
  }
}

void plan_trace(std::string_view text) {
  std::vector<sublet::memory::TraceEvent> events;
  try {
    events = sublet::memory::parse_trace(text, "input");
  } catch (const sublet::IoError&) {
    return;
  }
  try {
    const sublet::memory::StaticPlan plan = sublet::memory::plan_static_arena(events);
    if (plan.arena_bytes < plan.lower_bound || !sublet::memory::plan_is_valid(plan)) std::abort();
  } catch (const sublet::ValueError&) {  // sizes past 2^64
  }
  // A 64 MiB simulated device refuses the large requests (OOM is an answer).
  sublet::memory::replay_trace_pytorch(events, "", std::size_t{64} << 20);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  plan_recompute(text);
  plan_trace(text);
  return 0;
}
