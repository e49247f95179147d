#pragma once
// The layout of one segment in PyTorch's memory snapshot (torch.cuda.memory._snapshot()'s
// "segments" entries, what pytorch.org/memory_viz reads), shared by sublet profile's snapshot
// (profile/memory_viz_snapshot.cpp) and the torch allocator library's
// (torch_allocator/snapshot_pickle.cpp). Header-only: the library compiles its own copy of what
// it uses and cannot link the profile library.
#include <cstdint>
#include <functional>

#include "memory/caching_allocator.h"
#include "profile/pickle_writer.h"

namespace sublet::profile {

// cudaStream_t values as PyTorch writes them: the handle's bits as an integer.
inline std::uint64_t memory_viz_stream_id(StreamHandle stream) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream));
}

inline const char* memory_viz_block_state(memory::BlockInfo::State state) {
  switch (state) {
    case memory::BlockInfo::State::ActiveAllocated: return "active_allocated";
    case memory::BlockInfo::State::ActivePending: return "active_awaiting_free";
    case memory::BlockInfo::State::Inactive: return "inactive";
  }
  return "inactive";
}

// One segment with its blocks; `frames(block)` gives each block's "frames" list.
inline PickleValue memory_viz_segment(const memory::SegmentInfo& s, std::int64_t device,
                                      const std::function<PickleValue(const memory::BlockInfo&)>& frames) {
  PickleValue::List blocks;
  for (const memory::BlockInfo& b : s.blocks) {
    blocks.push_back(PickleValue::Dict{{"address", static_cast<std::uint64_t>(b.address)},
                                       {"size", static_cast<std::uint64_t>(b.size)},
                                       {"requested_size", static_cast<std::uint64_t>(b.requested_size)},
                                       {"state", memory_viz_block_state(b.state)},
                                       {"frames", frames(b)}});
  }
  return PickleValue::Dict{{"device", device},
                           {"address", static_cast<std::uint64_t>(s.address)},
                           {"total_size", static_cast<std::uint64_t>(s.total_size)},
                           {"allocated_size", static_cast<std::uint64_t>(s.allocated_size)},
                           {"active_size", static_cast<std::uint64_t>(s.active_size)},
                           {"requested_size", static_cast<std::uint64_t>(s.requested_size)},
                           {"stream", memory_viz_stream_id(s.stream)},
                           {"segment_type", s.is_small_pool ? "small" : "large"},
                           {"segment_pool_id", PickleValue::Tuple{{0, static_cast<std::uint64_t>(s.private_pool_id)}}},
                           {"is_expandable", s.is_expandable},
                           {"frames", PickleValue::List{}},
                           {"blocks", std::move(blocks)}};
}

}  // namespace sublet::profile
