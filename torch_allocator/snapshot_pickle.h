#pragma once
// The snapshot of libsublet_torch_allocator.so as PyTorch writes one
// (torch.cuda.memory._dump_snapshot: a pickle of the dict torch.cuda.memory._snapshot() returns),
// so that pytorch.org/memory_viz, torch.cuda._memory_viz and `sublet replay` read it:
//   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size",
//                  "requested_size", "stream", "segment_type": "small"|"large",
//                  "segment_pool_id": (0, id), "is_expandable", "frames": [],
//                  "blocks": [{"address", "size", "requested_size",
//                              "state": "active_allocated"|"active_awaiting_free"|"inactive", "frames": []}]}],
//    "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames": []}, ...], ...],
//    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF", "SUBLET_ALLOC_CONF", "max_split_size",
//                           "garbage_collection_threshold", "expandable_segments",
//                           "roundup_power2_divisions": {"1": d, "2": d, ..., "32768": d}},
//    "external_annotations": []}
// As in PyTorch's traces, an alloc's size and its frees' sizes are the bytes requested, and a
// segment event's size is the segment's (or the mapped range's). device_traces has one list per
// device up to the highest device with an allocator; they are empty unless history was recorded.
#include <string>

#include "torch_allocator/device_table.h"

namespace sublet::torch_allocator {

std::string snapshot_pickle(const DeviceTable& table);
void write_snapshot(const std::string& path, const DeviceTable& table);

}  // namespace sublet::torch_allocator
