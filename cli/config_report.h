#pragma once
// The configuration in force, as `sublet config` and `--print-config` print it: the allocator
// configuration of each device kind (memory/config.h, with where it came from), the OpenMP wait
// policy (cli/openmp_wait_policy.h), then every SUBLET_* switch (core/switch_table.h) with its
// value and source. Secrets show only as set.
#include <iosfwd>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace sublet::cli {

nlohmann::json config_report_json();
void print_config_report(std::ostream& out);

// `--print-config` on `command`: print the report to stderr before the command runs.
void add_print_config_flag(CLI::App& command);

}  // namespace sublet::cli
