#pragma once
// Each sublet subcommand registers itself on the application from its own file.
#include <CLI/CLI.hpp>

namespace sublet::cli {

void add_demo_command(CLI::App& app);
void add_replay_command(CLI::App& app);

}  // namespace sublet::cli
