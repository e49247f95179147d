#pragma once
// One workload under several allocator settings: the settings a sweep tries and the figures each
// row reports, all read from the allocator's memory_stats() keys (the same keys as PyTorch's
// torch.cuda.memory_stats(), so bench/pytorch_step.py fills the same columns from PyTorch).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "memory/config.h"

namespace sublet::memory {

struct SweepSetting {
  std::string label;      // "pytorch", "sublet", or the SUBLET_ALLOC_CONF text as given
  AllocatorConfig config;
};

// The standard list: PyTorch's defaults (fixed segments), max_split_size_mb:512,
// roundup_power2_divisions:16, both of them, expandable_segments:True, and sublet's defaults
// for `device` (default_config: expandable segments, on the CPU as on CUDA).
std::vector<SweepSetting> default_sweep_settings(Device device);
// "pytorch;max_split_size_mb:512,roundup_power2_divisions:16;sublet": entries separated by ';'
// (a setting has commas of its own); "pytorch" and "sublet" name the two defaults, any other
// entry is a SUBLET_ALLOC_CONF string applied to PyTorch's defaults. Empty: the standard list.
// ConfigError naming the entry.
std::vector<SweepSetting> parse_sweep_settings(const std::string& list, Device device);

struct SweepRow {
  std::string label;
  std::string alloc_conf;               // AllocatorConfig::to_string() ("" for PyTorch's defaults)
  std::int64_t peak_allocated = 0;      // allocated_bytes.all.peak
  std::int64_t peak_reserved = 0;       // reserved_bytes.all.peak
  // Reserved but not in an allocated block, at the first moment reserved memory reached its
  // peak: waste.{holes_bytes,free_segments_bytes,mapped_unused_bytes}.all.at_peak. Absent when
  // the statistics have no waste split (PyTorch's).
  std::optional<std::int64_t> unallocated_at_peak;
  std::int64_t segments_created = 0;    // segment.all.allocated
  std::int64_t device_allocs = 0;       // num_device_alloc
  std::int64_t retries = 0;             // num_alloc_retries
  std::int64_t ooms = 0;                // num_ooms
  std::optional<double> us_per_sample;  // wall time per token (or image); absent for replays

  double reserved_per_allocated() const;  // peak_reserved / peak_allocated (0 when nothing was allocated)
};

// The row from a memory_stats() map; Error naming a missing key.
SweepRow sweep_row_from_stats(const std::string& label, const std::string& alloc_conf,
                              const std::map<std::string, std::int64_t>& stats);

}  // namespace sublet::memory
