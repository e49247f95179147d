#pragma once
// One event of an allocation trace: what a replay (analysis/replay.h), the static planner
// (analysis/static_plan.h) and a recorded private pool (CachingAllocator::record_private_pool) share.
#include <cstddef>
#include <cstdint>

#include "memory/block.h"

namespace sublet::memory {

// 32 bytes: traces of tens of millions of events are replayed whole.
struct TraceEvent {
  // EmptyCache and ResetPeaks: the program called empty_cache() / reset_peak_memory_stats() here.
  enum class Action : std::uint8_t { Alloc, Free, EmptyCache, ResetPeaks } action = Action::Alloc;
  // Alloc only: what the block held (its tag when it was freed: a tensor saved for backward is
  // tagged Activation after its allocation). Informational: a replay allocates without it.
  BlockCategory category = BlockCategory::Unknown;
  std::uint64_t id = 0;          // pairs a free with its alloc
  std::size_t size = 0;          // requested bytes (alloc only)
  std::uint64_t stream = 0;
};

}  // namespace sublet::memory
