#pragma once
// segment_map.svg: the segment map over time. x = the history's events in order (allocations,
// frees, segment calls), y = the address inside each segment, segments stacked (each lane as tall
// as its bytes, with a minimum). Live blocks are coloured by category, holes (free bytes below a
// live block of the same segment) orange, other reserved free bytes grey, an expandable segment's
// unmapped range white. Red marks show where reserved memory grew, numbered where it reached a
// new peak, and a table below names the request behind each (size, step, shape).
#include <cstdint>
#include <string>
#include <vector>

#include "profile/segment_timeline.h"

namespace sublet::profile {

struct SegmentMapStep {
  std::uint64_t first_event = 0;  // the step's first event in the history
  std::string label;              // "step 3"
  std::string shape;              // "batch 22 x 728 tokens"; may be empty
};

struct SegmentMapOptions {
  std::string title;
  std::string subtitle;                // the allocator configuration, the source
  std::vector<SegmentMapStep> steps;   // in event order; may be empty (a trace without steps)
};

std::string segment_map_svg(const SegmentTimeline& timeline, const SegmentMapOptions& options);

}  // namespace sublet::profile
