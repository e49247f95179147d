#pragma once
// What `sublet config` prints about the switches (core/switch_table.h): each one's value in force
// and where it came from, and warnings for SUBLET_* variables in the environment that sublet
// does not read.
#include <string>
#include <vector>

#include "core/tuning.h"

namespace sublet {

enum class SettingSource { Default, Environment, Flag };
const char* setting_source_name(SettingSource source);  // "default", "environment", "flag"

struct SwitchRow {
  std::string name;
  std::string type;   // switch_type_name
  std::string scope;  // switch_scope_name
  std::string value;  // a secret's is "set" or "unset"
  SettingSource source = SettingSource::Default;
  std::string doc;
};

// One row per switch of the table, in its order; a retired switch only when it is set. A runtime
// switch shows `in_force`'s value: from the environment when its variable is set there, from a
// flag when `in_force` differs from what the environment alone gives, else the default.
std::vector<SwitchRow> switch_rows(const EnvironmentLookup& lookup, const TuningOptions& in_force);

// "SUBLET_*" names among `names` (e.g. the environment's) that the table does not list, each with
// the nearest listed name; and the retired ones that are set, each saying it is no longer read.
std::vector<std::string> environment_warnings(const std::vector<std::string>& names);
// The names of the process environment's variables.
std::vector<std::string> environment_names();

}  // namespace sublet
