// sublet config [--json]: the configuration in force (cli/config_report.h).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/config_report.h"

namespace sublet::cli {

void add_config_command(CLI::App& app) {
  CLI::App* config = app.add_subcommand(
      "config", "List the allocator configuration and every SUBLET_* switch in force, with where each came from");
  auto json = std::make_shared<bool>(false);
  config->add_flag("--json", *json, "print the same as JSON");
  config->callback([json] {
    if (*json) {
      std::cout << config_report_json().dump(2) << "\n";
    } else {
      print_config_report(std::cout);
    }
  });
}

}  // namespace sublet::cli
