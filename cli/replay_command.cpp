// sublet replay TRACE [--alloc-conf STR]... [--rules sublet|pytorch] [--capacity-mib N] [--device N|cuda:N] [--json PATH]
//                     [--segment-map SVG]
// Replays a recorded allocation trace through the caching allocator on the simulated backend
// under several settings and prints what each would have done (and writes it as JSON). TRACE is
// a sublet-alloc-trace (JSON) or a PyTorch memory snapshot (a pickle, gzip-compressed or not),
// told apart by content. A snapshot's first row, "recorded", is its own run: the recorded
// settings, with the cache releases PyTorch made inside allocations where it made them.
// --rules picks whose allocator rules every row follows: sublet's own CachingAllocator (the
// default) or PyTorch 2.11's (analysis/pytorch_rules.h), under which the recorded row also takes
// the snapshot's segment addresses and gives torch.cuda.memory_stats()'s figures exactly.
// --segment-map draws the trace's segments over time (profile/segment_map_svg.h) under the first
// setting tried, as sublet profile draws a profiled run.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "bench/step/sweep_report.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/flag_checks.h"
#include "cli/run_files.h"
#include "core/atomic_write.h"
#include "core/format_bytes.h"
#include "core/errors.h"
#include "cli/trace_source.h"
#include "analysis/pytorch_rules.h"
#include "analysis/replay.h"
#include "profile/output_file.h"
#include "profile/trace_segment_map.h"

namespace sublet::cli {
namespace {

const std::vector<std::string> kDefaultSettings = {
    "",
    "max_split_size_mb:128",
    "max_split_size_mb:512",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:16",
    "expandable_segments:True",
};

void print_results(const std::vector<memory::ReplayResult>& results, std::size_t events) {
  const auto bytes = [](std::size_t b) { return sublet::format_byte_count(b); };
  fmt::print("Replayed {} events on the simulated backend (capacity {}), under {} allocator rules.\n\n", events,
             bytes(results.front().capacity), results.front().rules == "pytorch" ? "PyTorch 2.11's" : "sublet's");
  fmt::print("{:<40} {:>14} {:>14} {:>10} {:>13} {:>8}\n", "setting", "peak reserved", "peak allocated",
             "frag@peak", "device allocs", "fits?");
  for (const auto& r : results) {
    const std::string label = r.label.empty() ? r.setting : r.label + " (" + r.setting + ")";
    fmt::print("{:<40} {:>14} {:>14} {:>9.1f}% {:>13} {:>8}\n", label, bytes(r.peak_reserved), bytes(r.peak_allocated),
               100.0 * r.fragmentation_at_peak, r.device_allocs,
               r.out_of_memory ? fmt::format("OOM@{}", r.oom_event) : "yes");
  }
  fmt::print("\nWaste at the reserved peak (the first moment reserved memory reached it): reserved = requested + the kinds\n");
  fmt::print("{:<40} {:>14} {:>12} {:>12} {:>12} {:>13} {:>12}\n", "setting", "peak reserved", "requested", "rounding",
             "holes", "free segments", "mapped unused");
  for (const auto& r : results) {
    const std::string label = r.label.empty() ? r.setting : r.label + " (" + r.setting + ")";
    if (!r.has_waste_at_peak) {
      fmt::print("{:<40} {:>14} {:>12}\n", label, bytes(r.peak_reserved), "n/a (pytorch rules)");
      continue;
    }
    const memory::WasteSplit& w = r.waste_at_peak;
    fmt::print("{:<40} {:>14} {:>12} {:>12} {:>12} {:>13} {:>12}\n", label, bytes(w.reserved), bytes(w.requested),
               bytes(w.rounding), bytes(w.holes.all()), bytes(w.free_segments.all()), bytes(w.mapped_unused));
  }
  std::vector<memory::SweepRow> rows;
  for (const auto& r : results) {
    rows.push_back(r.sweep);
    rows.back().label = r.label.empty() ? r.setting : r.label + " (" + r.setting + ")";
  }
  std::ostringstream table;
  bench::print_sweep_table(rows, "token", table);
  fmt::print("\nThe columns of bench step --alloc-conf-sweep:\n{}", table.str());
  fmt::print("\nfrag@peak: share of the free reserved memory outside the largest free block, at the (last) moment\n"
             "allocated memory peaked, as sublet profile's \"at the peak\".\n");
  if (std::any_of(results.begin(), results.end(), [](const memory::ReplayResult& r) { return r.out_of_memory; }))
    fmt::print("OOM@N: out of memory at event N of the trace (counting from 0): the setting does not fit the capacity.\n");
}

// The row's waste split at the reserved peak in bytes, or null under PyTorch's rules.
nlohmann::json waste_json(const memory::ReplayResult& r) {
  if (!r.has_waste_at_peak) return nullptr;
  const memory::WasteSplit& w = r.waste_at_peak;
  return {{"reserved_bytes", w.reserved},
          {"requested_bytes", w.requested},
          {"rounding_bytes", w.rounding},
          {"holes_bytes", w.holes.all()},
          {"holes_small_pool_bytes", w.holes.small_pool},
          {"holes_large_pool_bytes", w.holes.large_pool},
          {"free_segments_bytes", w.free_segments.all()},
          {"mapped_unused_bytes", w.mapped_unused}};
}

// {"format": "sublet-replay-report", "source": {...}, "rows": [...]}: the layout `sublet replay`
// uses for every kind of trace.
void write_report_json(const std::string& path, const std::vector<memory::ReplayResult>& results, const nlohmann::json& source) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : results) {
    rows.push_back({{"label", r.label.empty() ? r.setting : r.label},
                    {"rules", r.rules},
                    {"alloc_conf", r.setting == "default" ? "" : r.setting},
                    {"capacity_bytes", r.capacity},
                    {"peak_allocated_bytes", r.peak_allocated},
                    {"peak_reserved_bytes", r.peak_reserved},
                    {"device_allocations", r.device_allocs},
                    {"fragmentation_at_peak", r.fragmentation_at_peak},
                    {"fits", !r.out_of_memory},
                    {"waste_at_peak", waste_json(r)},
                    {"sweep", bench::sweep_row_json(r.sweep, "token")},
                    {"oom_event", r.out_of_memory ? nlohmann::json(r.oom_event) : nlohmann::json(nullptr)}});
  }
  const nlohmann::json doc = {{"format", "sublet-replay-report"},
                              {"source", source},
                              {"rows", rows}};
  const std::string text = doc.dump(2) + "\n";
  io::write_text_atomically(path, text);
}

}  // namespace

void add_replay_command(CLI::App& app) {
  CLI::App* replay = app.add_subcommand("replay", "What-if: replay an allocation trace under other allocator settings");
  auto trace_path = std::make_shared<std::string>();
  auto settings = std::make_shared<std::vector<std::string>>();
  auto capacity_mib = std::make_shared<std::size_t>(std::size_t{1} << 20);
  auto json_path = std::make_shared<std::string>();
  auto device = std::make_shared<int>(0);
  auto rules = std::make_shared<std::string>("sublet");
  replay->add_option("trace", *trace_path,
                     "allocation trace: JSON as written by sublet profile, or a PyTorch memory snapshot "
                     "(torch.cuda.memory._dump_snapshot; gzip-compressed too)")
      ->required()
      ->check(existing_file_or_stdin());
  replay->add_option("--alloc-conf", *settings,
                     "a SUBLET_ALLOC_CONF string to try; repeat for several (default: a standard set of six, and a PyTorch "
                     "snapshot's recorded settings)");
  replay->add_option("--rules", *rules,
                     "whose allocator rules to replay under: sublet (sublet's own caching allocator) or pytorch "
                     "(PyTorch 2.11's, expandable segments included; a snapshot's recorded row then equals its memory_stats())")
      ->check(CLI::IsMember({"sublet", "pytorch"}))
      ->capture_default_str();
  replay->add_option("--capacity-mib", *capacity_mib, "simulated device capacity in MiB")->check(CLI::Range(1, 1 << 30))->capture_default_str();
  CLI::Option* device_option =
      replay->add_option("--device", *device, "PyTorch snapshots: the device whose trace to replay, N or cuda:N (default 0)")
          ->check(CLI::Range(0, 1 << 20))
          ->transform(snapshot_device_index());
  replay->add_option("--json", *json_path, "also write the rows as JSON (format sublet-replay-report)");
  auto map_path = std::make_shared<std::string>();
  replay->add_option("--segment-map", *map_path,
                     "also draw the segments over time as SVG, replayed by sublet's allocator under the first --alloc-conf "
                     "(default: PyTorch's default knobs): blocks, holes, and the requests that made reserved memory grow");
  replay->callback([trace_path, settings, capacity_mib, json_path, map_path, device, device_option, rules] {
    check_output_file("--json", *json_path);
    check_output_file("--segment-map", *map_path);
    if (!map_path->empty() && *rules == "pytorch")
      throw ValueError("replay --segment-map: draws sublet's allocator; drop --rules pytorch (or draw with --rules sublet)");
    for (const std::string& setting : *settings) memory::AllocatorConfig::parse(setting, {}, "--alloc-conf");
    RunFiles()
        .input("trace", *trace_path, "trace")
        .output("--json", *json_path, "report")
        .output("--segment-map", *map_path, "segment map")
        .check();
    const TraceSource source =
        load_trace_source(*trace_path, device_option->count() > 0 ? std::optional<int>(*device) : std::nullopt);
    // A snapshot's own settings join the standard set, so its row sits beside the what-ifs.
    std::vector<std::string> tried = settings->empty() ? kDefaultSettings : *settings;
    if (settings->empty() && source.has_recorded_settings &&
        std::find(tried.begin(), tried.end(), source.recorded_alloc_conf) == tried.end())
      tried.push_back(source.recorded_alloc_conf);
    const bool pytorch_rules = *rules == "pytorch";
    const std::size_t capacity = *capacity_mib * memory::kMiB;
    const auto replay_one = [&](const std::vector<memory::TraceEvent>& events, const std::string& setting,
                                const memory::RecordedSegments* addresses) {
      return pytorch_rules ? memory::replay_trace_pytorch(events, setting, capacity, addresses)
                           : memory::replay_trace(events, setting, capacity);
    };
    std::vector<memory::ReplayResult> results;
    // A snapshot's first row is its own run: the recorded settings, and the cache releases
    // PyTorch made inside allocations where it made them.
    if (!source.recorded_events.empty()) {
      results.push_back(replay_one(source.recorded_events, source.recorded_alloc_conf, &source.recorded_segments));
      results.back().label = "recorded";
    }
    for (const std::string& setting : tried)
      results.push_back(replay_one(source.events, setting, nullptr));
    print_results(results, source.events.size());
    if (!json_path->empty()) write_report_json(*json_path, results, source.source);
    if (!map_path->empty()) {
      const std::string setting = settings->empty() ? "" : settings->front();
      const profile::TraceSegmentMap map = profile::trace_segment_map(
          source.events, setting, capacity, "Segments over time: " + std::filesystem::path(*trace_path).filename().string());
      profile::write_text_file(*map_path, map.svg);
      fmt::print("\nWrote the segment map under {} to {}{}\n", setting.empty() ? "PyTorch's default knobs" : setting, *map_path,
                 map.out_of_memory ? fmt::format(" (out of memory at trace event {}: the map ends there)", map.events_replayed)
                                   : "");
    }
  });
}

}  // namespace sublet::cli
