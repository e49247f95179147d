#include "analysis/replay.h"

#include <algorithm>
#include <unordered_map>

#include "core/errors.h"
#include "memory/simulated_backend.h"

namespace sublet::memory {

std::vector<TraceEvent> trace_from_history(const std::vector<HistoryEvent>& history) {
  std::vector<TraceEvent> trace;
  std::unordered_map<std::uintptr_t, std::size_t> live;  // address -> index of its alloc in `trace`
  std::uint64_t next_id = 1;
  for (const HistoryEvent& e : history) {
    const auto stream = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(e.stream));
    if (e.kind == AllocatorEventKind::Alloc) {
      live[e.address] = trace.size();
      trace.push_back({.action = TraceEvent::Action::Alloc, .category = e.category, .id = next_id++,
                       .size = e.requested_size, .stream = stream});
    } else if (e.kind == AllocatorEventKind::FreeRequested) {
      auto it = live.find(e.address);
      if (it == live.end()) continue;  // allocated before the history started
      TraceEvent& alloc = trace[it->second];
      alloc.category = e.category;  // the tag it ended with
      trace.push_back({.action = TraceEvent::Action::Free, .id = alloc.id, .stream = stream});
      live.erase(it);
    } else if (e.kind == AllocatorEventKind::CacheEmptied) {
      trace.push_back({.action = TraceEvent::Action::EmptyCache});
    } else if (e.kind == AllocatorEventKind::PeaksReset) {
      trace.push_back({.action = TraceEvent::Action::ResetPeaks});
    }
  }
  return trace;
}

ReplayResult replay_trace(const std::vector<TraceEvent>& events, const std::string& config_text, std::size_t capacity) {
  ReplayResult result;
  result.setting = config_text.empty() ? "default" : config_text;
  result.capacity = capacity;
  CachingAllocator allocator(std::make_unique<SimulatedBackend>(capacity), AllocatorConfig::parse(config_text));
  std::unordered_map<std::uint64_t, Block*> live;
  std::size_t peak_allocated_seen = 0;
  // Fragmentation walks every free block, so it is read once per peak, not once per allocation
  // (a trace that only grows would be quadratic): at the next event that may change the free
  // blocks other than by a new peak (settle_peak).
  bool peak_pending = false;
  const auto settle_peak = [&] {
    if (!peak_pending) return;
    result.fragmentation_at_peak = allocator.fragmentation();
    peak_pending = false;
  };
  for (const TraceEvent& e : events) {
    if (e.action == TraceEvent::Action::EmptyCache) {
      settle_peak();
      allocator.empty_cache();
    } else if (e.action == TraceEvent::Action::ResetPeaks) {
      settle_peak();
      allocator.reset_peak_memory_stats();
      result.peak_reserved = allocator.memory_reserved();
      peak_allocated_seen = allocator.memory_allocated();
      result.fragmentation_at_peak = allocator.fragmentation();
    } else if (e.action == TraceEvent::Action::Free) {
      settle_peak();
      auto it = live.find(e.id);
      if (it != live.end()) {
        allocator.free(it->second);
        live.erase(it);
      }
    } else {
      // An allocation that succeeds is a new peak (nothing was freed since the pending one); one
      // that may fail releases cached blocks first, so the pending peak is read before it.
      if (peak_pending && may_run_out(allocator.memory_reserved(), e.size, capacity)) settle_peak();
      try {
        live[e.id] = allocator.allocate(e.size, reinterpret_cast<StreamHandle>(static_cast<std::uintptr_t>(e.stream)));
      } catch (const OutOfMemoryError& oom) {
        result.out_of_memory = true;
        result.oom_event = result.events_replayed;
        result.oom_message = oom.what();
        break;
      }
      result.peak_reserved = std::max(result.peak_reserved, allocator.memory_reserved());
      // At the last moment allocated bytes peak: sublet profile's "at the peak" is the same moment.
      if (allocator.memory_allocated() >= peak_allocated_seen) {
        peak_allocated_seen = allocator.memory_allocated();
        peak_pending = true;
      }
    }
    ++result.events_replayed;
  }
  settle_peak();
  result.peak_allocated = allocator.max_memory_allocated();
  result.has_waste_at_peak = true;
  result.waste_at_peak = allocator.waste_at_peak();
  const DeviceStats stats = allocator.stats();
  result.device_allocs = stats.num_device_alloc;
  result.alloc_retries = stats.num_alloc_retries;
  result.sweep = sweep_row_from_stats(result.setting, config_text, allocator.memory_stats());
  for (auto& [id, block] : live) allocator.free(block);
  return result;
}

bool may_run_out(std::size_t reserved, std::size_t request, std::size_t capacity) {
  // A new segment is at most twice the request (power-of-two rounding) plus a large-pool buffer.
  constexpr std::size_t kSlack = std::size_t{64} << 20;
  if (request > capacity || reserved > capacity) return true;
  return capacity - reserved < kSlack || (capacity - reserved - kSlack) / 2 < request;
}

}  // namespace sublet::memory
