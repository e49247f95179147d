#pragma once
// snapshot.pickle: the allocator's segments and the allocation history in the dictionary layout
// of torch.cuda.memory._snapshot(), so PyTorch's memory_viz (pytorch.org/memory_viz, or
// torch.cuda._memory_viz) draws a sublet run:
//   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
//                  "requested_size", "stream", "segment_type": "small"|"large",
//                  "segment_pool_id": (0, id), "is_expandable", "frames": [],
//                  "blocks": [{"address", "size", "requested_size",
//                              "state": "active_allocated"|"active_awaiting_free"|"inactive",
//                              "frames": [...]}]}],
//    "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames": [...]}]],
//    "allocator_settings": {...}}
// Stack frames stand for what sublet knows instead of a Python stack: one frame whose filename
// is the annotation ("layer1.0.conv1/fwd") and whose name is the block's category.
// Block states use PyTorch's names ("active_awaiting_free" for a block waiting on stream events).
#include <string>
#include <vector>

#include "profile/pickle_writer.h"
#include "profile/profile_session.h"

namespace sublet::profile {

PickleValue memory_viz_snapshot(const ProfileRun& run);
void write_memory_viz_snapshot(const std::string& path, const ProfileRun& run);

}  // namespace sublet::profile
