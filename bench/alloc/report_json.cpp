#include "bench/alloc/report_json.h"

#include <fstream>

#include "bench/alloc/report_table.h"
#include "bench/alloc/tensor_workload.h"
#include "core/atomic_write.h"
#include "core/errors.h"

namespace sublet::bench {
namespace {

using nlohmann::json;

template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json cell_json(const AllocBenchResult& result, const RowResult& row, const CellResult& c) {
  return {{"allocator", c.allocator},
          {"ok", c.ok},
          {"error", c.ok ? json(nullptr) : json(c.error)},
          {"median_ns_per_pair", c.ok ? json(c.median_ns) : json(nullptr)},
          {"p10_ns", c.ok ? json(c.p10_ns) : json(nullptr)},
          {"p90_ns", c.ok ? json(c.p90_ns) : json(nullptr)},
          {"round_medians_ns", c.round_medians_ns},
          {"ratio_to_baseline", or_null(result.ratio_to_baseline(row, c))},
          {"pairs_timed", c.pairs_timed},
          {"batches", c.batches},
          {"peak_reserved_bytes", or_null(c.peak_reserved_bytes)},
          {"driver_allocation_calls", or_null(c.driver_allocation_calls)},
          {"allocator_pair_ns", or_null(c.allocator_pair_ns)},
          {"runtime_overhead_ns", or_null(c.runtime_overhead_ns())}};
}

}  // namespace

json report_json(const AllocBenchResult& result) {
  const AllocBenchOptions& o = result.options;
  json doc;
  doc["benchmark"] = "sublet bench alloc";
  doc["version"] = 1;
  doc["device"] = bench_device_name(o.device);
  doc["baseline"] = result.baseline();
  doc["settings"] = {{"repetitions", o.repetitions},
                     {"rounds", o.rounds},
                     {"batch_pairs", o.batch_pairs},
                     {"warmup_pairs", o.warmup_pairs},
                     {"max_seconds_per_cell", o.max_seconds_per_cell},
                     {"seed", o.seed},
                     {"history", or_null(o.history_path)},
                     {"torch_plugin", or_null(o.torch_plugin_path)},
                     {"quick", o.quick}};
  doc["allocators"] = json::array();
  for (const AllocatorInfo& a : result.allocators)
    doc["allocators"].push_back({{"name", a.name},
                                 {"description", a.description},
                                 {"tensor_description", a.tensor_description.empty() ? json(nullptr) : json(a.tensor_description)}});
  doc["rows"] = json::array();
  for (const RowResult& row : result.rows) {
    json r = {{"workload", row.workload},
              {"size_bytes", row.workload == "pair" || row.workload == "tensor" ? json(row.size_bytes) : json(nullptr)},
              {"shape", row.workload == "tensor" ? json(row.shape) : json(nullptr)},
              {"label", row.label},
              {"peak_live_bytes", row.skipped ? json(nullptr) : json(row.peak_live_bytes)},
              {"skipped", row.skipped},
              {"skip_reason", row.skipped ? json(row.skip_reason) : json(nullptr)},
              {"results", json::array()}};
    for (const CellResult& c : row.cells) r["results"].push_back(cell_json(result, row, c));
    doc["rows"].push_back(std::move(r));
  }
  const GoalCheck g = check_goals(result);
  doc["goals"] = {{"allocator", result.baseline()},
                  {"pair_ns", kPairGoalNs},
                  {"pair_met", g.pair_met},
                  {"worst_pair_ns", g.worst_pair_ns},
                  {"worst_pair_size_bytes", g.worst_pair_size},
                  {"churn_ns", kChurnGoalNs},
                  {"churn_met", g.churn_met},
                  {"churn_measured_ns", g.churn_ns},
                  {"tensor_ns", kTensorGoalNs},
                  {"tensor_met", g.tensor_measured ? json(g.tensor_met) : json(nullptr)},
                  {"worst_tensor_ns", g.tensor_measured ? json(g.worst_tensor_ns) : json(nullptr)},
                  {"worst_tensor_label", g.tensor_measured ? json(g.worst_tensor_label) : json(nullptr)}};
  json speedups = json::array();
  for (const GoalCheck::Speedup& s : g.speedups)
    speedups.push_back({{"faster_than", s.allocator}, {"required", s.required}, {"rows", "pair, churn, replay"},
                        {"least", s.lowest}, {"least_row", s.lowest_row}, {"met", s.met},
                        {"least_tensor_rows", s.lowest_tensor_row.empty() ? json(nullptr) : json(s.lowest_tensor)},
                        {"least_tensor_row", s.lowest_tensor_row.empty() ? json(nullptr) : json(s.lowest_tensor_row)}});
  doc["goals"]["speedups"] = speedups;
  return doc;
}

void write_text_file(const std::string& path, const std::string& text) {
  io::write_text_atomically(path, text);
}

}  // namespace sublet::bench
