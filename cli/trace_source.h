#pragma once
// The recorded step a command reads: a sublet-alloc-trace (JSON) or a PyTorch memory snapshot (a
// pickle, gzip-compressed or not), told apart by content. Used by `sublet replay` and `sublet plan`.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/pytorch_rules.h"
#include "memory/trace_event.h"

namespace sublet::cli {

struct TraceSource {
  std::vector<memory::TraceEvent> events;
  nlohmann::json source;             // {"kind": "sublet-trace" | "pytorch-snapshot", "events", "device"}
  std::string recorded_alloc_conf;   // a snapshot's allocator_settings as SUBLET_ALLOC_CONF text
  bool has_recorded_settings = false;
  // A snapshot's run as PyTorch made it (memory::with_recorded_releases); empty for sublet traces.
  std::vector<memory::TraceEvent> recorded_events;
  // Where the snapshot's run put its segments (for --rules pytorch's recorded row); empty otherwise.
  memory::RecordedSegments recorded_segments;
};

// `device` picks a snapshot's device (default 0); ValueError when given for a sublet trace.
// Prints one line about a snapshot (its device, entries and recorded settings).
TraceSource load_trace_source(const std::string& path, std::optional<int> device);

}  // namespace sublet::cli
