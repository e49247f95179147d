#include "cli/config_report.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/openmp_wait_policy.h"
#include "core/switch_report.h"
#include "core/tuning.h"
#include "memory/config.h"
#include "memory/registry.h"

namespace sublet::cli {
namespace {

std::vector<Device> allocator_devices() {
  std::vector<Device> devices{Device::cpu()};
  if (memory::cuda_built()) devices.push_back(Device::cuda(0));
  return devices;
}

}  // namespace

nlohmann::json config_report_json() {
  const memory::ConfigOrigin origin = memory::config_origin_from_environment();
  nlohmann::json allocator{{"source", origin.variable.empty() ? "default" : "environment"},
                           {"variable", origin.variable},
                           {"origin", origin.describe()},
                           {"devices", nlohmann::json::object()}};
  for (const Device device : allocator_devices()) {
    const std::string kind = device.is_cpu() ? "cpu" : "cuda";
    allocator["devices"][kind] = memory::AllocatorConfig::from_environment(memory::default_config(device)).to_string();
  }
  nlohmann::json switches = nlohmann::json::array();
  for (const SwitchRow& row : switch_rows(process_environment(), tuning())) {
    switches.push_back({{"name", row.name},
                        {"type", row.type},
                        {"scope", row.scope},
                        {"value", row.value},
                        {"source", setting_source_name(row.source)},
                        {"doc", row.doc}});
  }
  const OpenMpWaitReport wait = openmp_wait_report(process_environment());
  const nlohmann::json openmp{{kWaitPolicyVariable, wait.wait_policy},
                              {kSpinCountVariable, wait.spin_count},
                              {"description", wait.description}};
  return {{"allocator", allocator}, {"openmp_wait", openmp}, {"switches", switches}};
}

void print_config_report(std::ostream& out) {
  const nlohmann::json report = config_report_json();
  const nlohmann::json& allocator = report["allocator"];
  out << "allocator configuration (" << allocator["origin"].get<std::string>() << "):\n";
  for (const auto& [kind, text] : allocator["devices"].items())
    out << fmt::format("  {:<5} {}\n", kind, text.get<std::string>().empty() ? "(defaults)" : text.get<std::string>());
  const nlohmann::json& openmp = report["openmp_wait"];
  const auto shown = [&](const char* name) {
    const std::string value = openmp[name].get<std::string>();
    return value.empty() ? std::string("(unset)") : value;
  };
  out << fmt::format("OpenMP wait policy: {} ({}={}, {}={})\n", openmp["description"].get<std::string>(),
                     kWaitPolicyVariable, shown(kWaitPolicyVariable), kSpinCountVariable, shown(kSpinCountVariable));
  std::size_t name_width = 0, value_width = 5;
  for (const nlohmann::json& row : report["switches"]) {
    name_width = std::max(name_width, row["name"].get<std::string>().size());
    value_width = std::min<std::size_t>(std::max(value_width, row["value"].get<std::string>().size()), 40);
  }
  out << "switches (docs/configuration.md):\n";
  out << fmt::format("  {:<{}}  {:<{}}  {:<11}  {:<9}  {}\n", "name", name_width, "value", value_width, "source", "scope",
                     "meaning");
  for (const nlohmann::json& row : report["switches"]) {
    const std::string value = row["value"].get<std::string>();
    out << fmt::format("  {:<{}}  {:<{}}  {:<11}  {:<9}  {}\n", row["name"].get<std::string>(), name_width,
                       value.empty() ? "(none)" : value, value_width, row["source"].get<std::string>(),
                       row["scope"].get<std::string>(), row["doc"].get<std::string>());
  }
}

void add_print_config_flag(CLI::App& command) {
  command.add_flag_callback(
      "--print-config", [] { print_config_report(std::cerr); },
      "print the allocator configuration and every SUBLET_* switch in force (as `sublet config`) to stderr first");
}

}  // namespace sublet::cli
