#pragma once
// `sublet replay --rules pytorch`: a replay under PyTorch 2.11's own caching-allocator rules
// (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator), restated as a small model rather
// than as a mode of sublet's CachingAllocator. The rules differ in too many places to keep apart
// by flags in sublet's hot path: best fit looks only at the first candidate (an oversize first
// fit fails the search instead of being skipped), expandable segments are one per stream *and
// pool* with 2 MiB pages for the small pool and 20 MiB for the large one, a free block at the end
// of an expandable segment counts its unmapped tail in best fit, a request that no free block
// fits grows the lowest-addressed run of free and unmapped space, and equal-size free blocks are
// chosen by address. The model keeps only what decides PyTorch's numbers (block sizes and
// addresses, pools, segments, pages); it has no memory of its own.
//
// Not modelled: garbage collection (PyTorch runs it only under a per-process memory fraction,
// which a snapshot does not record), blocks used on other streams (a trace's free is the
// moment PyTorch could reuse the block), CUDA-graph private pools.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/replay.h"
#include "memory/trace_event.h"

namespace sublet::memory {

// Where PyTorch's run put its segments, from the snapshot: with them a replay of the recorded
// run breaks ties between equal-size free blocks as PyTorch did (by address). Without them, and
// for a cudaMalloc whose size is not the recorded one at the same position, addresses are made up
// (increasing, far above real ones).
struct RecordedSegments {
  struct Segment {
    std::uint64_t address = 0;
    std::size_t size = 0;
  };
  std::vector<Segment> device_allocs;        // segment_alloc entries (cudaMalloc), in order
  std::vector<std::uint64_t> expandable_bases;  // the start of each expandable segment, in order of creation
};

// As replay_trace (analysis/replay.h), under PyTorch 2.11's rules; `config_text` is read as
// SUBLET_ALLOC_CONF (the same keys as PYTORCH_CUDA_ALLOC_CONF). Peak allocated counts block
// sizes, as PyTorch's allocated_bytes; device allocations count cudaMalloc calls and mapping calls
// of expandable segments, as its num_device_alloc. The result's `rules` is "pytorch".
ReplayResult replay_trace_pytorch(const std::vector<TraceEvent>& events, const std::string& config_text, std::size_t capacity,
                                  const RecordedSegments* recorded = nullptr);

}  // namespace sublet::memory
