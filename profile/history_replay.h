#pragma once
// The allocator's state at any moment of the profiled run, rebuilt by replaying the history up to
// that moment through a fresh allocator with the same configuration on a backend that hands out
// the live run's segment addresses again (never touching memory). The segment rules do not depend
// on the backend, and with the same addresses best fit breaks ties between equal free blocks the
// same way, so the rebuilt state is the live run's block for block: this is how summary.txt gets a
// memory_summary() and segments.svg a segment map *at the peak*, which no hook could read without
// stopping inside an allocation. Exact when recording began on an empty allocator
// (Baseline::allocated == 0 and reserved == 0), which profile_training() arranges, and when no
// block waited on another stream (the replay frees at once).
#include <cstdint>
#include <string>
#include <vector>

#include "memory/caching_allocator.h"
#include "profile/profile_session.h"

namespace sublet::profile {

struct ReplayedState {
  std::vector<memory::SegmentInfo> segments;  // blocks carry the live run's annotations and final categories
  std::string summary;                        // memory_summary()
  std::size_t allocated = 0, reserved = 0;
  std::size_t peak_reserved = 0;              // max_memory_reserved() of the replay so far
  std::size_t largest_free_block = 0;
  double fragmentation = 0;                   // 1 - largest free block / free reserved
  memory::WasteSplit waste;                   // reserved memory by use at that moment
  memory::WasteSplit waste_at_reserved_peak;  // the same, when reserved memory first reached peak_reserved
};

// Replays events [0, through] (alloc and free requests; the allocator makes its own segment calls).
ReplayedState replay_through(const ProfileRun& run, std::uint64_t through);

}  // namespace sublet::profile
