#pragma once
// What-if answers without a GPU: replay a recorded allocation history (sizes as requested, in
// the order the program made them) through a fresh allocator on a SimulatedBackend under some
// configuration and capacity, and report what that allocator would have done.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "memory/alloc_conf_sweep.h"
#include "memory/config.h"
#include "memory/history.h"
#include "memory/trace_event.h"
#include "memory/waste.h"

namespace sublet::memory {

// Alloc/free pairs from a history (frees matched to allocs by address) and the empty_cache() /
// reset_peak_memory_stats() markers; other events are dropped.
std::vector<TraceEvent> trace_from_history(const std::vector<HistoryEvent>& history);

// JSON: {"format": "sublet-alloc-trace", "version": 2,
//        "events": [{"action": "alloc", "id": 1, "size": 4096, "stream": 0, "category": "activation"},
//                   {"action": "free", "id": 1}, {"action": "empty_cache"}, {"action": "reset_peaks"}, ...]}
// Version 1 files (alloc and free only, no categories) read as before. Written atomically
// (core/atomic_write.h), one event per line; read with a streaming parser (analysis/trace_file.cpp),
// so a trace costs its TraceEvents (32 bytes each), not a JSON document. Reading
// validates every event and throws IoError naming the file and the event. load_trace reads "-" as
// standard input and streams from a FIFO that has a writer (core/input_file.h).
void save_trace(const std::string& path, const std::vector<TraceEvent>& events);
std::vector<TraceEvent> load_trace(const std::string& path);
// The same from an open file (parsed as it is read) or from text already read; `source` names it
// in messages.
std::vector<TraceEvent> read_trace(std::FILE* file, const std::string& source);
std::vector<TraceEvent> parse_trace(std::string_view text, const std::string& source);

struct ReplayResult {
  std::string setting;               // the config text ("default" when empty)
  std::string label;                 // the row's name where it is not the setting ("recorded")
  std::string rules = "sublet";      // whose allocator rules: "sublet", or "pytorch" (analysis/pytorch_rules.h)
  std::size_t capacity = 0;
  std::size_t peak_reserved = 0;     // both peaks since the trace's last reset_peaks (or its start)
  std::size_t peak_allocated = 0;
  // 1 - largest free block / free reserved memory, at the last moment allocated bytes peaked (the
  // moment sublet profile calls the peak): the share of free cached memory a request as large as
  // the largest free block could not use.
  double fragmentation_at_peak = 0;
  // The waste split at the first moment reserved memory reached its peak (memory/waste.h); only
  // under sublet's rules (has_waste_at_peak), since it reads sublet's allocator.
  bool has_waste_at_peak = false;
  WasteSplit waste_at_peak;
  std::int64_t device_allocs = 0;
  std::int64_t alloc_retries = 0;
  bool out_of_memory = false;
  std::size_t events_replayed = 0;   // up to the OOM when there is one
  std::size_t oom_event = 0;         // out_of_memory: the 0-based index of the event that failed
  std::string oom_message;
  // The sweep's columns (memory/alloc_conf_sweep.h) for this row, from the allocator's
  // memory_stats() at the end of the replay under sublet's rules; under PyTorch's, from the
  // model's counters (segments: those cudaMalloc'd and expandable ones made; OOMs: 0 or 1, since
  // the replay stops at the first).
  SweepRow sweep;
};

ReplayResult replay_trace(const std::vector<TraceEvent>& events, const std::string& config_text, std::size_t capacity);

// Whether a request of `request` bytes, with `reserved` of `capacity` reserved, might need the
// allocator to release cached blocks or fail (conservative: true near the capacity). Replays read
// the fragmentation of a pending peak before such a request, while the blocks are as they were.
bool may_run_out(std::size_t reserved, std::size_t request, std::size_t capacity);

}  // namespace sublet::memory
