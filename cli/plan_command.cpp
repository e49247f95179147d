// sublet plan [TRACE] [--device N|cuda:N] [--recompute BENCH.json] [--json PATH] [--svg PATH]
// Plans memory instead of measuring it:
//  - TRACE (a sublet-alloc-trace, or a PyTorch memory snapshot): for the recorded step, the
//    live-bytes lower bound, the static arena plan (analysis/static_plan.h) and what the caching
//    allocators reserve for the same requests under sublet's rules and PyTorch 2.11's (sublet
//    replay's rows), side by side;
//  - --recompute: the blocks `sublet bench step --memory-budget ... --json` measured; the
//    cheapest runs of blocks to recompute (analysis/recompute_plan.h) for budgets from 90% to 30%
//    of the measured peak, and with --svg the budget-versus-time curve.
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/flag_checks.h"
#include "cli/run_files.h"
#include "cli/trace_source.h"
#include "core/atomic_write.h"
#include "core/errors.h"
#include "core/format_bytes.h"
#include "core/input_file.h"
#include "core/printable.h"
#include "analysis/pytorch_rules.h"
#include "analysis/recompute_plan.h"
#include "analysis/replay.h"
#include "analysis/static_plan.h"
#include "models/measured_budget.h"
#include "models/resnet_recompute.h"
#include "profile/recompute_curve_svg.h"

namespace sublet::cli {
namespace {

const std::vector<std::string> kPlanSettings = {"", "expandable_segments:True"};
const std::vector<double> kBudgetFractions = {0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3};

std::string bytes(std::size_t b) { return sublet::format_byte_count(b); }

struct PlanFlags {
  std::string trace_path, recompute_path, json_path, svg_path;
  std::optional<int> device;
};

// Static plan rows for the trace; fills doc's lower_bound_bytes, planned_arena_bytes and rows.
void plan_trace(const PlanFlags& flags, nlohmann::json& doc) {
  const TraceSource source = load_trace_source(flags.trace_path, flags.device);
  const auto& events = source.events;
  const memory::StaticPlan plan = memory::plan_static_arena(events);
  const auto times_bound = [&](std::size_t b) {
    return plan.lower_bound ? static_cast<double>(b) / static_cast<double>(plan.lower_bound) : 0.0;
  };
  fmt::print("{} events, {} allocations\n", events.size(), plan.allocations.size());
  fmt::print("{:<44} {:>14} {:>10}\n", "", "bytes", "x bound");
  fmt::print("{:<44} {:>14} {:>10.3f}\n", "lower bound (most bytes live at once)", bytes(plan.lower_bound), 1.0);
  fmt::print("{:<44} {:>14} {:>10.3f}\n", "static plan: one arena (" + plan.heuristic + ")", bytes(plan.arena_bytes),
             times_bound(plan.arena_bytes));
  for (const auto& [name, arena] : plan.tried)
    fmt::print("  {:<42} {:>14} {:>10.3f}\n", name, bytes(arena), times_bound(arena));
  nlohmann::json rows = nlohmann::json::array();
  // What the caching allocators reserve for the same requests: sublet's, and PyTorch 2.11's own
  // rules (analysis/pytorch_rules.h, exact on the recorded H200 snapshots).
  for (const char* rules : {"sublet", "pytorch"}) {
    for (const std::string& setting : kPlanSettings) {
      constexpr std::size_t kCapacity = std::size_t{1} << 40;  // 1 TiB, as replay's default
      const memory::ReplayResult r = std::string(rules) == "pytorch" ? memory::replay_trace_pytorch(events, setting, kCapacity)
                                                                      : memory::replay_trace(events, setting, kCapacity);
      const std::string label = (std::string(rules) == "pytorch" ? "PyTorch rules, " : "sublet rules, ") +
                                (setting.empty() ? std::string("default (fixed segments)") : setting);
      // A row that ran out of memory says so, as replay's rows do: its peak is not the run's.
      if (r.out_of_memory)
        fmt::print("{:<44} {:>14} {:>10}  (out of memory at event {} on the simulated 1 TiB device)\n", label,
                   fmt::format("OOM@{}", r.oom_event), "-", r.oom_event);
      else
        fmt::print("{:<44} {:>14} {:>10.3f}  (peak reserved)\n", label, bytes(r.peak_reserved), times_bound(r.peak_reserved));
      rows.push_back({{"label", label}, {"rules", rules}, {"alloc_conf", setting},
                      {"peak_allocated_bytes", r.peak_allocated}, {"peak_reserved_bytes", r.peak_reserved},
                      {"fits", !r.out_of_memory},
                      {"oom_event", r.out_of_memory ? nlohmann::json(r.oom_event) : nlohmann::json(nullptr)}});
    }
  }
  doc["source"] = source.source;
  doc["events"] = events.size();
  doc["allocations"] = plan.allocations.size();
  doc["lower_bound_bytes"] = plan.lower_bound;
  doc["planned_arena_bytes"] = plan.arena_bytes;
  doc["heuristic"] = plan.heuristic;
  doc["heuristics"] = nlohmann::json::object();
  for (const auto& [name, arena] : plan.tried) doc["heuristics"][name] = arena;
  doc["rows"] = rows;
}

// Recompute rows for budgets of the measured peak; fills doc's recompute_rows.
void plan_recompute(const PlanFlags& flags, nlohmann::json& doc) {
  const std::string text = io::read_input_file(flags.recompute_path, {.kind = io::InputKind::file_or_stream, .what = "--recompute"});
  nlohmann::json bench;
  try {
    bench = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IoError("--recompute " + flags.recompute_path + ": not JSON (" + e.what() + ")");
  }
  const models::MeasuredBudgetInput measured = models::measured_budget_from_json(bench, "--recompute " + flags.recompute_path);
  const std::vector<memory::RecomputeUnit>& units = measured.units;
  const std::size_t baseline = measured.baseline_peak;
  const double forward_ms = measured.forward_ms;
  fmt::print("\nRecomputation ({} blocks measured; peak {} with nothing recomputed, forward {:.2f} ms):\n",
             units.size(), bytes(baseline), forward_ms);
  fmt::print("{:>8} {:>14} {:>14} {:>12}  {}\n", "budget", "bytes", "peak (model)", "+forward", "recomputed blocks");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<profile::RecomputeCurvePoint> points;
  for (double fraction : kBudgetFractions) {
    const auto budget = static_cast<std::size_t>(fraction * static_cast<double>(baseline));
    const memory::RecomputeChoice c = memory::choose_recompute(units, baseline, budget);
    const std::string runs = models::describe_runs(units, c.runs);
    fmt::print("{:>7.0f}% {:>14} {:>14} {:>12}  {}\n", 100 * fraction, bytes(budget), bytes(c.predicted_peak),
               c.fits ? fmt::format("{:.2f} ms", c.recompute_ms) : std::string("no fit"),
               c.fits ? runs : "smallest reachable: " + runs);
    rows.push_back({{"budget_fraction", fraction}, {"budget_bytes", budget}, {"fits", c.fits},
                    {"predicted_peak_bytes", c.predicted_peak}, {"recompute_ms", c.recompute_ms}, {"recomputed", runs}});
    points.push_back({budget, c.fits, c.predicted_peak, c.recompute_ms, runs});
  }
  doc["recompute_rows"] = rows;
  doc["recompute_baseline_peak_bytes"] = baseline;
  if (!flags.svg_path.empty()) {
    const std::string title = fmt::format("{} batch {}: recomputation under a memory budget",
                                          measured.model.empty() ? std::string("model") : printable(measured.model, 60),
                                          measured.batch_size);
    io::write_text_atomically(flags.svg_path, profile::recompute_curve_svg(title, points, baseline, forward_ms));
    fmt::print("wrote {}\n", flags.svg_path);
  }
}

void run_plan(const PlanFlags& flags) {
  check_output_file("--json", flags.json_path);
  check_output_file("--svg", flags.svg_path);
  RunFiles()
      .input("trace", flags.trace_path, "trace")
      .input("--recompute", flags.recompute_path, "bench step report")
      .output("--json", flags.json_path, "plan report")
      .output("--svg", flags.svg_path, "recomputation curve")
      .check();
  if (flags.trace_path.empty() && flags.recompute_path.empty())
    throw ValueError("plan: give a TRACE (sublet-alloc-trace or PyTorch snapshot), --recompute BENCH.json, or both");
  if (!flags.svg_path.empty() && flags.recompute_path.empty())
    throw ValueError("plan --svg: draws the recomputation curve, so it needs --recompute BENCH.json");
  nlohmann::json doc = {{"format", "sublet-plan-report"}};
  if (!flags.trace_path.empty()) plan_trace(flags, doc);
  if (!flags.recompute_path.empty()) plan_recompute(flags, doc);
  if (!flags.json_path.empty()) io::write_text_atomically(flags.json_path, doc.dump(2) + "\n");
}

}  // namespace

void add_plan_command(CLI::App& app) {
  CLI::App* plan = app.add_subcommand(
      "plan", "Plan a recorded step's memory: lower bound, a static arena, what the allocator reserves, and "
              "recomputation under budgets");
  auto flags = std::make_shared<PlanFlags>();
  auto device = std::make_shared<int>(0);
  plan->add_option("trace", flags->trace_path,
                   "allocation trace: sublet-alloc-trace JSON (bench step --alloc-trace) or a PyTorch memory snapshot")
      ->check(existing_file_or_stdin());
  CLI::Option* device_option =
      plan->add_option("--device", *device, "PyTorch snapshots: the device whose trace to plan, N or cuda:N (default 0)")
          ->check(CLI::Range(0, 1 << 20))
          ->transform(snapshot_device_index());
  plan->add_option("--recompute", flags->recompute_path,
                   "the JSON of `sublet bench step --memory-budget ... --json`: recomputation choices for budgets")
      ->check(existing_file_or_stdin());
  plan->add_option("--json", flags->json_path, "also write the figures as JSON (format sublet-plan-report)");
  plan->add_option("--svg", flags->svg_path, "with --recompute: write the budget-versus-time curve as SVG");
  plan->callback([flags, device, device_option] {
    if (device_option->count() > 0) flags->device = *device;
    run_plan(*flags);
  });
}

}  // namespace sublet::cli
