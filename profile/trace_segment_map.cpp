#include "profile/trace_segment_map.h"

#include <unordered_map>

#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/caching_allocator.h"
#include "memory/config.h"
#include "memory/history.h"
#include "memory/simulated_backend.h"
#include "profile/segment_map_svg.h"

namespace sublet::profile {

TraceSegmentMap trace_segment_map(const std::vector<memory::TraceEvent>& events, const std::string& config_text,
                                  std::size_t capacity, const std::string& title) {
  TraceSegmentMap result;
  const memory::AllocatorConfig config = memory::AllocatorConfig::parse(config_text);
  memory::CachingAllocator allocator(std::make_unique<memory::SimulatedBackend>(capacity), config);
  // Every event of the replay kept: the map is drawn from the whole history.
  memory::AllocationHistory history(std::max<std::size_t>(1024, 4 * events.size() + 1024));
  history.attach(allocator);
  std::unordered_map<std::uint64_t, memory::Block*> live;
  for (const memory::TraceEvent& e : events) {
    if (e.action == memory::TraceEvent::Action::EmptyCache) {
      allocator.empty_cache();
    } else if (e.action == memory::TraceEvent::Action::ResetPeaks) {
      allocator.reset_peak_memory_stats();
    } else if (e.action == memory::TraceEvent::Action::Free) {
      const auto it = live.find(e.id);
      if (it != live.end()) {
        allocator.free(it->second);
        live.erase(it);
      }
    } else {
      try {
        live[e.id] = allocator.allocate(e.size, reinterpret_cast<StreamHandle>(static_cast<std::uintptr_t>(e.stream)), e.category);
      } catch (const OutOfMemoryError&) {
        result.out_of_memory = true;
        break;
      }
    }
    ++result.events_replayed;
  }
  history.detach();
  for (auto& [id, block] : live) allocator.free(block);
  SegmentMapOptions options;
  options.title = title;
  options.subtitle = "replayed on a simulated device of " + sublet::format_bytes(static_cast<std::int64_t>(capacity)) +
                     " under " + (config_text.empty() ? std::string("PyTorch's default knobs") : config.to_string()) +
                     (result.out_of_memory ? "; out of memory at trace event " + std::to_string(result.events_replayed) +
                                                 " (the map ends there)"
                                           : "");
  result.svg = segment_map_svg(build_segment_timeline(history.events()), options);
  return result;
}

}  // namespace sublet::profile
