// sublet plan TRACE [--json PATH]
// For a recorded step: the live-bytes lower bound, the static arena plan (memory/static_plan.h)
// and what the caching allocator's rules reserve for the same requests (sublet replay's rows),
// side by side.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/atomic_write.h"
#include "core/format_bytes.h"
#include "memory/replay.h"
#include "memory/static_plan.h"

namespace sublet::cli {
namespace {

const std::vector<std::string> kPlanSettings = {"", "expandable_segments:True"};

void run_plan(const std::string& trace_path, const std::string& json_path) {
  check_output_file("--json", json_path);
  const auto events = memory::load_trace(trace_path);
  const memory::StaticPlan plan = memory::plan_static_arena(events);
  const auto bytes = [](std::size_t b) { return sublet::format_bytes(static_cast<std::int64_t>(b)); };
  const double ratio = plan.lower_bound ? static_cast<double>(plan.arena_bytes) / static_cast<double>(plan.lower_bound) : 0.0;
  fmt::print("{} events, {} allocations\n", events.size(), plan.allocations.size());
  fmt::print("{:<44} {:>14} {:>10}\n", "", "bytes", "x bound");
  fmt::print("{:<44} {:>14} {:>10.3f}\n", "lower bound (most bytes live at once)", bytes(plan.lower_bound), 1.0);
  fmt::print("{:<44} {:>14} {:>10.3f}\n", "static plan: one arena (" + plan.heuristic + ")", bytes(plan.arena_bytes), ratio);
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& setting : kPlanSettings) {
    const memory::ReplayResult r = memory::replay_trace(events, setting, std::size_t{1} << 40);  // 1 TiB, as replay's default
    const std::string label = "sublet rules, " + (setting.empty() ? std::string("default (fixed segments)") : setting);
    fmt::print("{:<44} {:>14} {:>10.3f}  (peak reserved)\n", label, bytes(r.peak_reserved),
               plan.lower_bound ? static_cast<double>(r.peak_reserved) / static_cast<double>(plan.lower_bound) : 0.0);
    rows.push_back({{"label", label}, {"rules", "sublet"}, {"alloc_conf", setting},
                    {"peak_allocated_bytes", r.peak_allocated}, {"peak_reserved_bytes", r.peak_reserved}});
  }
  if (!json_path.empty()) {
    const nlohmann::json doc = {{"format", "sublet-plan-report"}, {"events", events.size()},
                                {"allocations", plan.allocations.size()}, {"lower_bound_bytes", plan.lower_bound},
                                {"planned_arena_bytes", plan.arena_bytes}, {"heuristic", plan.heuristic}, {"rows", rows}};
    const std::string text = doc.dump(2) + "\n";
    io::write_text_atomically(json_path, text);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  CLI::App* plan = app.add_subcommand("plan", "Plan a recorded step's memory: lower bound, a static arena, and what the allocator reserves");
  auto trace_path = std::make_shared<std::string>();
  auto json_path = std::make_shared<std::string>();
  plan->add_option("trace", *trace_path, "allocation trace (sublet-alloc-trace JSON, e.g. from bench step --alloc-trace)")
      ->required()
      ->check(CLI::ExistingFile);
  plan->add_option("--json", *json_path, "also write the figures as JSON (format sublet-plan-report)");
  plan->callback([trace_path, json_path] { run_plan(*trace_path, *json_path); });
}

}  // namespace sublet::cli
