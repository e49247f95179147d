#pragma once
// The machine-readable report. Layout (numbers in ns and bytes; null where not observable):
//   {"benchmark": "sublet bench alloc", "version": 1, "device": "cpu", "baseline": "sublet",
//    "settings": {"repetitions", "batch_pairs", "warmup_pairs", "max_seconds_per_cell", "seed",
//                 "history", "quick"},
//    "allocators": [{"name", "description", "tensor_description" (null without tensors)}],
//    "rows": [{"workload": "pair"|"tensor"|"churn"|"replay", "size_bytes" (pair, tensor),
//              "shape" (tensor), "label", "peak_live_bytes", "skipped", "skip_reason",
//              "results": [{"allocator", "ok", "error", "median_ns_per_pair", "p10_ns", "p90_ns",
//                           "ratio_to_baseline", "pairs_timed", "batches",
//                           "peak_reserved_bytes", "driver_allocation_calls",
//                           "allocator_pair_ns", "runtime_overhead_ns" (tensor rows)}]}],
//    "goals": {"pair_ns": 100, "pair_met", "worst_pair_ns", "churn_ns": 150, "churn_met",
//              "tensor_ns": 300, "tensor_met" (null when no tensor row ran), "worst_tensor_ns", ...}}
// On tensor rows "median_ns_per_pair" is per tensor created and destroyed, and "pairs_timed"
// counts tensors.
#include <nlohmann/json.hpp>
#include <string>

#include "bench/alloc/alloc_bench.h"

namespace sublet::bench {

nlohmann::json report_json(const AllocBenchResult& result);
// Throws IoError naming the path when it cannot be written.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace sublet::bench
