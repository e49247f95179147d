#include "memory/alloc_conf_sweep.h"

#include "core/errors.h"
#include "memory/registry.h"

namespace sublet::memory {
namespace {

constexpr const char* kPytorchDefaults = "pytorch";
constexpr const char* kSubletDefaults = "sublet";

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

SweepSetting setting_named(const std::string& entry, Device device) {
  if (entry == kPytorchDefaults) return {entry, AllocatorConfig{}};
  if (entry == kSubletDefaults) return {entry, default_config(device)};
  return {entry, AllocatorConfig::parse(entry, AllocatorConfig{}, "--alloc-conf-sweep")};
}

std::int64_t key(const std::map<std::string, std::int64_t>& stats, const std::string& name) {
  const auto it = stats.find(name);
  if (it == stats.end()) throw Error("allocator sweep: memory_stats() has no key " + name);
  return it->second;
}

}  // namespace

std::vector<SweepSetting> default_sweep_settings(Device device) {
  std::vector<SweepSetting> settings;
  for (const char* entry : {kPytorchDefaults, "max_split_size_mb:512", "roundup_power2_divisions:16",
                            "max_split_size_mb:512,roundup_power2_divisions:16", "expandable_segments:True",
                            kSubletDefaults})
    settings.push_back(setting_named(entry, device));
  return settings;
}

std::vector<SweepSetting> parse_sweep_settings(const std::string& list, Device device) {
  if (trim(list).empty()) return default_sweep_settings(device);
  std::vector<SweepSetting> settings;
  std::size_t begin = 0;
  for (;;) {
    const auto end = list.find(';', begin);
    const std::string entry = trim(list.substr(begin, end - begin));
    if (entry.empty())
      throw ConfigError("--alloc-conf-sweep '" + list + "': an empty entry; expected settings separated by ';' "
                        "(pytorch, sublet, or SUBLET_ALLOC_CONF strings)");
    settings.push_back(setting_named(entry, device));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return settings;
}

double SweepRow::reserved_per_allocated() const {
  return peak_allocated > 0 ? static_cast<double>(peak_reserved) / static_cast<double>(peak_allocated) : 0.0;
}

SweepRow sweep_row_from_stats(const std::string& label, const std::string& alloc_conf,
                              const std::map<std::string, std::int64_t>& stats) {
  SweepRow row;
  row.label = label;
  row.alloc_conf = alloc_conf;
  row.peak_allocated = key(stats, "allocated_bytes.all.peak");
  row.peak_reserved = key(stats, "reserved_bytes.all.peak");
  if (stats.contains("waste.holes_bytes.all.at_peak"))
    row.unallocated_at_peak = key(stats, "waste.holes_bytes.all.at_peak") +
                              key(stats, "waste.free_segments_bytes.all.at_peak") +
                              key(stats, "waste.mapped_unused_bytes.all.at_peak");
  row.segments_created = key(stats, "segment.all.allocated");
  row.device_allocs = key(stats, "num_device_alloc");
  row.retries = key(stats, "num_alloc_retries");
  row.ooms = key(stats, "num_ooms");
  return row;
}

}  // namespace sublet::memory
