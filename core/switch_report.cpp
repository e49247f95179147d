#include "core/switch_report.h"

#include <unistd.h>

#include "core/switch_table.h"

extern char** environ;

namespace sublet {

const char* setting_source_name(SettingSource source) {
  switch (source) {
    case SettingSource::Default: return "default";
    case SettingSource::Environment: return "environment";
    case SettingSource::Flag: return "flag";
  }
  return "?";
}

std::vector<SwitchRow> switch_rows(const EnvironmentLookup& lookup, const TuningOptions& in_force) {
  const TuningOptions from_environment = TuningOptions::from_environment(lookup);
  std::vector<SwitchRow> rows;
  for (const SwitchSpec& spec : switch_table()) {
    const std::optional<std::string> set = lookup(std::string(spec.name));
    if (spec.scope == SwitchScope::Retired && !set) continue;
    SwitchRow row{std::string(spec.name), std::string(switch_type_name(spec.type)),
                  std::string(switch_scope_name(spec.scope)), "", SettingSource::Default, std::string(spec.doc)};
    // A flag set to "" says off; an empty path, text or secret is the same as none.
    if (set && (spec.type == SwitchType::Flag || !set->empty())) row.source = SettingSource::Environment;
    if (const std::optional<std::string> value = in_force.value_text(spec.name)) {
      row.value = *value;
      if (*value != from_environment.value_text(spec.name)) row.source = SettingSource::Flag;
    } else if (spec.type == SwitchType::Secret) {
      row.value = row.source == SettingSource::Environment ? "set" : "unset";
    } else {
      row.value = row.source == SettingSource::Environment ? *set : std::string(spec.default_value);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<std::string> environment_warnings(const std::vector<std::string>& names) {
  std::vector<std::string> warnings;
  for (const std::string& name : names) {
    if (!name.starts_with("SUBLET_")) continue;
    const SwitchSpec* spec = find_switch(name);
    if (spec == nullptr) {
      warnings.push_back(name + " is set but sublet reads no such variable; did you mean " +
                         std::string(nearest_switch(name)) + "? (`sublet config` lists them all)");
    } else if (spec->scope == SwitchScope::Retired) {
      warnings.push_back(name + " is set but no longer read: what it turned off is always on now");
    }
  }
  return warnings;
}

std::vector<std::string> environment_names() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    names.push_back(text.substr(0, text.find('=')));
  }
  return names;
}

}  // namespace sublet
