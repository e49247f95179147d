#pragma once
// The segment map of a recorded allocation trace (sublet replay --segment-map): the trace replayed
// through sublet's caching allocator on a simulated device under one setting, its history read
// back and drawn as segment_map_svg.h draws a profiled run. A replay that runs out of memory
// draws up to the failure, and says so in the subtitle.
#include <cstddef>
#include <string>
#include <vector>

#include "memory/trace_event.h"

namespace sublet::profile {

struct TraceSegmentMap {
  std::string svg;
  bool out_of_memory = false;
  std::size_t events_replayed = 0;  // trace events up to the failure when there is one
};

// `config_text`: allocator settings (max_split_size_mb:512,...) applied to PyTorch's defaults, as
// sublet replay's rows.
TraceSegmentMap trace_segment_map(const std::vector<memory::TraceEvent>& events, const std::string& config_text,
                                  std::size_t capacity, const std::string& title);

}  // namespace sublet::profile
