#pragma once
// The table and JSON of an allocator-settings sweep (memory/alloc_conf_sweep.h): one row per
// setting, the same columns for `sublet bench step --alloc-conf-sweep`, `sublet replay` and
// bench/pytorch_step.py --alloc-conf-sweep.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/alloc_conf_sweep.h"

namespace sublet::bench {

// `sample` names what the time column is per ("token" or "image"); rows without a time print n/a.
void print_sweep_table(const std::vector<memory::SweepRow>& rows, const std::string& sample, std::ostream& out);
// {"label", "alloc_conf", "peak_allocated_bytes", "peak_reserved_bytes", "reserved_per_allocated",
//  "reserved_unallocated_at_peak_bytes" (null without a waste split), "segments_created",
//  "device_allocations", "alloc_retries", "ooms", "us_per_<sample>" (null without a time)}
nlohmann::json sweep_row_json(const memory::SweepRow& row, const std::string& sample);

}  // namespace sublet::bench
