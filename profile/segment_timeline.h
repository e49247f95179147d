#pragma once
// The segments of an allocation history over time, read from its events alone (no replay): where
// each segment lay, when blocks lived in it and at which offsets, how far its live blocks reached,
// and every moment reserved memory grew, with the request that made it grow. segment_map_svg.h
// draws it. Works on any history that starts on an empty allocator (a profiled run, a replay).
//
//   SegmentTimeline t = build_segment_timeline(history.events());
//   t.growths[0].request_size   // the request that took the first segment
#include <cstdint>
#include <string>
#include <vector>

#include "memory/history.h"

namespace sublet::profile {

// One moment at which a segment's levels changed: from `event` on (an index into the history),
// free bytes below `hole_top` are holes (they sit below a live block) and free bytes from there up
// to `mapped` are unused reserved memory (a free fixed segment, or an expandable segment's mapped
// tail). A fixed segment holding any live block counts all of its free bytes as holes, as
// memory/waste.h does.
struct SegmentLevel {
  std::uint64_t event = 0;
  std::size_t hole_top = 0;
  std::size_t mapped = 0;
};

struct TimelineSegment {
  int id = 0;                 // 1, 2, ... in the order the segments appeared
  std::uintptr_t base = 0;
  std::size_t extent = 0;     // fixed: its size; expandable: the most it ever had mapped
  bool expandable = false;
  bool small_pool = false;    // a fixed 2 MiB segment (only the small pool makes those)
  std::uint64_t created = 0;  // the event that made it
  std::uint64_t released = 0; // the event that gave it back; the history's length while it lives
  std::vector<SegmentLevel> levels;  // in event order, the first at `created`
  std::string label() const;  // "segment 3: 20.0 MiB large" / "segment 1: expandable (up to 94.0 MiB)"
};

struct TimelineBlock {
  int segment = 0;            // index into SegmentTimeline::segments
  std::size_t offset = 0;     // from the segment's base
  std::size_t size = 0;       // the block (rounded)
  std::size_t requested = 0;
  std::uint64_t begin = 0;    // its Alloc event
  std::uint64_t end = 0;      // its FreeCompleted event; the history's length while it lives
  memory::BlockCategory category = memory::BlockCategory::Unknown;
  std::uint32_t annotation = 0;
};

// A moment reserved memory grew: a segment taken, or pages mapped onto an expandable segment.
struct ReservedGrowth {
  std::uint64_t event = 0;
  int segment = 0;                 // index into SegmentTimeline::segments
  bool new_segment = false;        // false: an expandable segment grew
  std::size_t bytes = 0;           // what was added
  std::size_t reserved_after = 0;
  bool new_peak = false;           // reserved memory passed every earlier value
  // The allocation the growth served (the Alloc that follows it); found = false when the history
  // ends first.
  bool found = false;
  std::uint64_t request_event = 0;
  std::size_t request_size = 0;       // the block handed out
  std::size_t request_requested = 0;  // what was asked for
  memory::BlockCategory request_category = memory::BlockCategory::Unknown;
  std::uint32_t request_annotation = 0;
};

struct SegmentTimeline {
  std::uint64_t event_count = 0;
  std::vector<TimelineSegment> segments;
  std::vector<TimelineBlock> blocks;
  std::vector<ReservedGrowth> growths;
  std::size_t peak_reserved = 0;
  std::uint64_t peak_event = 0;        // the first event at which reserved memory reached its peak
  std::size_t unplaced_blocks = 0;     // allocations outside every known segment (history began late)
};

SegmentTimeline build_segment_timeline(const std::vector<memory::HistoryEvent>& events);

}  // namespace sublet::profile
