#include "memory/replay.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/atomic_write.h"
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
      trace.push_back({TraceEvent::Action::Alloc, next_id++, e.requested_size, stream, e.category});
    } else if (e.kind == AllocatorEventKind::FreeRequested) {
      auto it = live.find(e.address);
      if (it == live.end()) continue;  // allocated before the history started
      TraceEvent& alloc = trace[it->second];
      alloc.category = e.category;  // the tag it ended with
      trace.push_back({TraceEvent::Action::Free, alloc.id, 0, stream});
      live.erase(it);
    } else if (e.kind == AllocatorEventKind::CacheEmptied) {
      trace.push_back({TraceEvent::Action::EmptyCache});
    } else if (e.kind == AllocatorEventKind::PeaksReset) {
      trace.push_back({TraceEvent::Action::ResetPeaks});
    }
  }
  return trace;
}

void save_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  nlohmann::json list = nlohmann::json::array();
  for (const TraceEvent& e : events) {
    switch (e.action) {
      case TraceEvent::Action::Alloc: {
        nlohmann::json alloc = {{"action", "alloc"}, {"id", e.id}, {"size", e.size}, {"stream", e.stream}};
        if (e.category != BlockCategory::Unknown) alloc["category"] = category_name(e.category);
        list.push_back(std::move(alloc));
        break;
      }
      case TraceEvent::Action::Free: list.push_back({{"action", "free"}, {"id", e.id}}); break;
      case TraceEvent::Action::EmptyCache: list.push_back({{"action", "empty_cache"}}); break;
      case TraceEvent::Action::ResetPeaks: list.push_back({{"action", "reset_peaks"}}); break;
    }
  }
  const nlohmann::json doc = {{"format", "sublet-alloc-trace"}, {"version", 2}, {"events", list}};
  const std::string text = doc.dump() + '\n';
  io::write_atomically(path, [&](std::FILE* file) { io::write_or_throw(file, text.data(), text.size(), path); });
}

std::vector<TraceEvent> load_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path + ": cannot open the allocation trace");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": not valid JSON (" + e.what() + ")");
  }
  const nlohmann::json* list = &doc;
  if (doc.is_object()) {
    if (doc.value("format", "") != "sublet-alloc-trace")
      throw IoError(path + ": expected \"format\": \"sublet-alloc-trace\"");
    const nlohmann::json version = doc.value("version", nlohmann::json(1));
    if (version != 1 && version != 2)
      throw IoError(path + ": sublet-alloc-trace version " + version.dump() + " is not one this build reads (1 or 2)");
    if (!doc.contains("events") || !doc["events"].is_array()) throw IoError(path + ": expected an \"events\" list");
    list = &doc["events"];
  } else if (!doc.is_array()) {
    throw IoError(path + ": expected a trace object or a list of events");
  }
  std::vector<TraceEvent> events;
  std::unordered_map<std::uint64_t, bool> live;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& item = (*list)[i];
    const auto where = [&](const std::string& what) { return IoError(path + ": event " + std::to_string(i) + ": " + what); };
    if (!item.is_object() || !item.contains("action"))
      throw where("expected {\"action\": \"alloc\"|\"free\"|\"empty_cache\"|\"reset_peaks\", ...}");
    const std::string action = item["action"].is_string() ? item["action"].get<std::string>() : "";
    if (action == "empty_cache" || action == "reset_peaks") {
      events.push_back({action == "empty_cache" ? TraceEvent::Action::EmptyCache : TraceEvent::Action::ResetPeaks});
      continue;
    }
    if (action != "alloc" && action != "free")
      throw where("unknown action '" + action + "' (expected alloc, free, empty_cache or reset_peaks)");
    if (!item.contains("id") || !item["id"].is_number_unsigned())
      throw where("a \"" + action + "\" event needs a non-negative integer \"id\"");
    TraceEvent e;
    e.id = item["id"].get<std::uint64_t>();
    if (action == "alloc") {
      if (!item.contains("size") || !item["size"].is_number_unsigned()) throw where("an alloc needs a non-negative integer \"size\"");
      e.action = TraceEvent::Action::Alloc;
      e.size = item["size"].get<std::size_t>();
      e.stream = item.contains("stream") && item["stream"].is_number_unsigned() ? item["stream"].get<std::uint64_t>() : 0;
      if (item.contains("category")) {
        const auto category = item["category"].is_string() ? category_from_name(item["category"].get<std::string>())
                                                            : std::nullopt;
        if (!category) throw where("unknown \"category\" " + item["category"].dump());
        e.category = *category;
      }
      if (live[e.id]) throw where("id " + std::to_string(e.id) + " allocated twice without a free");
      live[e.id] = true;
    } else {
      e.action = TraceEvent::Action::Free;
      if (!live[e.id]) throw where("free of id " + std::to_string(e.id) + " that is not allocated");
      live[e.id] = false;
    }
    events.push_back(e);
  }
  return events;
}

ReplayResult replay_trace(const std::vector<TraceEvent>& events, const std::string& config_text, std::size_t capacity) {
  ReplayResult result;
  result.setting = config_text.empty() ? "default" : config_text;
  result.capacity = capacity;
  CachingAllocator allocator(std::make_unique<SimulatedBackend>(capacity), AllocatorConfig::parse(config_text));
  std::unordered_map<std::uint64_t, Block*> live;
  for (const TraceEvent& e : events) {
    if (e.action == TraceEvent::Action::EmptyCache) {
      allocator.empty_cache();
    } else if (e.action == TraceEvent::Action::ResetPeaks) {
      allocator.reset_peak_memory_stats();
      result.peak_reserved = allocator.memory_reserved();
      result.fragmentation_at_peak = allocator.fragmentation();
    } else if (e.action == TraceEvent::Action::Free) {
      auto it = live.find(e.id);
      if (it != live.end()) {
        allocator.free(it->second);
        live.erase(it);
      }
    } else {
      try {
        live[e.id] = allocator.allocate(e.size, reinterpret_cast<StreamHandle>(static_cast<std::uintptr_t>(e.stream)));
      } catch (const OutOfMemoryError& oom) {
        result.out_of_memory = true;
        result.oom_message = oom.what();
        break;
      }
      const std::size_t reserved = allocator.memory_reserved();
      if (reserved > result.peak_reserved) {
        result.peak_reserved = reserved;
        result.fragmentation_at_peak = allocator.fragmentation();
      }
    }
    ++result.events_replayed;
  }
  result.peak_allocated = allocator.max_memory_allocated();
  const DeviceStats stats = allocator.stats();
  result.device_allocs = stats.num_device_alloc;
  result.alloc_retries = stats.num_alloc_retries;
  for (auto& [id, block] : live) allocator.free(block);
  return result;
}

}  // namespace sublet::memory
