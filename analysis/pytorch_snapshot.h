#pragma once
// PyTorch memory snapshots as replayable traces. A snapshot is what
//   torch.cuda.memory._record_memory_history(max_entries=...)   # before the run
//   torch.cuda.memory._dump_snapshot("snap.pickle")              # after it
// writes: pickle.dump of the dict torch.cuda.memory._snapshot() returns (torch/csrc/cuda/Module.cpp),
//   {"segments": [...],                          # the allocator's state at the dump
//    "device_traces": [[entry, ...], ...],       # one list per device, oldest first
//    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": str, "max_split_size": int,
//                           "garbage_collection_threshold": float, "expandable_segments": bool,
//                           "roundup_power2_divisions": {"1": int, "2": int, ..., "32768": int}, ...},
//    "external_annotations": [...]}
// and each trace entry is {"action": str, "addr": int, "size": int, "stream": int, "time_us": int,
// "frames": [...]} ("device_free" instead of "addr" for "oom"). The actions
// (c10/cuda/CUDACachingAllocator.h TraceEntry):
//   alloc            a block was handed out; size = the bytes requested
//   free_requested   the program freed it; free_completed: the allocator can reuse it (later
//                    than free_requested when the block was used on other streams)
//   segment_alloc / segment_free   cudaMalloc / cudaFree of a whole segment
//   segment_map / segment_unmap    pages of an expandable segment mapped / unmapped
//   snapshot, oom    markers
// Older snapshots lack "allocator_settings" and "time_us"; both are optional here.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/pickle_reader.h"
#include "analysis/pytorch_rules.h"
#include "analysis/replay.h"

namespace sublet::memory {

struct PytorchSnapshotTrace {
  std::vector<TraceEvent> events;
  int device = 0;
  int device_count = 0;        // len(device_traces): PyTorch lists every device of the machine
  std::size_t trace_entries = 0;  // the device's raw entries, of every action
  // The recorded allocator_settings as a SUBLET_ALLOC_CONF string (empty: PyTorch's defaults, or
  // no settings in the snapshot), and PyTorch's own text of them (PYTORCH_CUDA_ALLOC_CONF as set).
  std::string alloc_conf;
  std::string pytorch_alloc_conf;
  bool has_allocator_settings = false;
  // Runs of segment_free/segment_unmap outside an allocation, mapped to EmptyCache events (see
  // pytorch_snapshot.cpp), and those inside one (PyTorch's retry or garbage collection freeing
  // cache to make room), which a replay decides for itself and are dropped.
  std::size_t empty_cache_events = 0;
  std::size_t internal_releases = 0;
  // Where in `events` each release inside an allocation happened (an index: before that event).
  std::vector<std::size_t> internal_release_positions;
  // Where PyTorch put its segments (segment_alloc addresses; the start of each expandable
  // segment: a segment_map far from every earlier one), for replay_trace_pytorch's ties.
  RecordedSegments segments;
};

// The run as PyTorch made it: `events` with an EmptyCache event where PyTorch released cache
// inside an allocation (its retry after a failed cudaMalloc, mostly cuDNN's benchmark asking for
// workspaces the device cannot give). Replayed under the recorded settings this reproduces
// PyTorch's peak reserved bytes (tests/data/pytorch_snapshots/README.md says on which snapshots).
std::vector<TraceEvent> with_recorded_releases(const PytorchSnapshotTrace& trace);

// True when `bytes` starts like a pickle of protocol 2 or later (PROTO 2..5), as every
// `pickle.dump` of Python 3 writes.
bool looks_like_pickle(std::string_view bytes);

// Converts device `device`'s trace of a snapshot read from `source` (named in messages): allocs
// paired with their free_completed by address become Alloc/Free with the requested size and the
// stream. Throws IoError when the pickle is not a snapshot, has no history, the device is out of
// range, or the history does not start from an empty allocator (PyTorch's ring buffer of
// max_entries overflowed, or recording started late), saying how to record a complete one.
PytorchSnapshotTrace convert_pytorch_snapshot(const pickle::Document& snapshot, int device, const std::string& source);

// read_file_maybe_gzip + pickle::parse + convert_pytorch_snapshot.
PytorchSnapshotTrace load_pytorch_snapshot(const std::string& path, int device);

}  // namespace sublet::memory
