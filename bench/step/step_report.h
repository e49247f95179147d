#pragma once
// The report of `sublet bench step`: a table on the terminal and JSON with the keys
// bench/pytorch_step.py writes too, so bench/compare_step.sh can put them side by side.
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/step/step_bench.h"

namespace sublet::bench {

void print_step_table(const std::vector<StepBenchResult>& results, std::ostream& out);
// {"framework", "model", "device", "batch_size", "input", "classes", "threads", "ms_per_step",
//  "cpu_ms_per_step", "img_per_s", "peak_allocated_bytes", "peak_reserved_bytes", "steps", "warmup", "step_ms"}
nlohmann::json step_json(const StepBenchResult& result);
// One object for one run, a list for several.
nlohmann::json step_json(const std::vector<StepBenchResult>& results);

}  // namespace sublet::bench
