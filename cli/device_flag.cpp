#include "cli/device_flag.h"

#include <algorithm>

#include "core/device.h"
#include "core/errors.h"
#include "core/printable.h"

namespace sublet::cli {
namespace {

bool is_device_value(const std::string& text, const DeviceValues& values) {
  if (text == "auto" || text == "cpu" || text == "cuda") return true;
  if (std::find(values.extra.begin(), values.extra.end(), text) != values.extra.end()) return true;
  if (!values.cuda_index || !text.starts_with("cuda:")) return false;
  try {
    Device::parse(text);
    return true;
  } catch (const ValueError&) {
    return false;
  }
}

}  // namespace

std::string device_value_list(const DeviceValues& values) {
  std::vector<std::string> names{"auto", "cpu", "cuda"};
  if (values.cuda_index) names.push_back("cuda:N");
  names.insert(names.end(), values.extra.begin(), values.extra.end());
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return list;
}

CLI::Option* add_device_option(CLI::App& app, std::string& value, const DeviceValues& values) {
  value = "auto";
  const std::string list = device_value_list(values);
  const CLI::Validator check(
      [values, list](std::string& text) -> std::string {
        return is_device_value(text, values) ? std::string() : "unknown value '" + printable(text) + "'; expected " + list;
      },
      "DEVICE");
  return app.add_option("--device", value, "where it runs: " + list + " (auto: the GPU when there is one, else cpu)")
      ->check(check)
      ->capture_default_str();
}

CLI::Validator snapshot_device_index() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::size_t digits_at = text.starts_with("cuda:") ? 5 : 0;
        if (text.size() == digits_at || text.find_first_not_of("0123456789", digits_at) != std::string::npos)
          return "expected a device of the snapshot as N or cuda:N, got '" + printable(text) + "'";
        text.erase(0, digits_at);
        return {};
      },
      "");
}

}  // namespace sublet::cli
