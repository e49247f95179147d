#include "bench/alloc/history.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/errors.h"

namespace sublet::bench {
namespace {

using nlohmann::json;

constexpr const char* kFormatName = "sublet-alloc-trace";

const json& event_list(const json& doc, const std::string& path) {
  if (doc.is_array()) return doc;
  if (!doc.is_object())
    throw IoError(path + ": expected a JSON object with \"events\" or a list of events, found " + doc.type_name());
  if (doc.contains("format") && doc["format"] != kFormatName)
    throw IoError(path + ": format is " + doc["format"].dump() + ", expected \"" + kFormatName + "\"");
  if (doc.contains("version") && doc["version"] != 1 && doc["version"] != 2)
    throw IoError(path + ": version " + doc["version"].dump() + " is not supported (expected 1 or 2)");
  if (!doc.contains("events") || !doc["events"].is_array())
    throw IoError(path + ": expected an \"events\" list");
  return doc["events"];
}

std::uint64_t unsigned_field(const json& event, const char* key, const std::string& where) {
  if (!event.contains(key)) throw IoError(where + ": missing \"" + key + "\"");
  const json& value = event[key];
  if (!value.is_number_unsigned())
    throw IoError(where + ": \"" + key + "\" must be a non-negative integer, found " + value.dump());
  return value.get<std::uint64_t>();
}

struct IdState {
  std::uint32_t slot;
  bool live;
  std::size_t size;
};

}  // namespace

ReplayHistory load_history(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open the allocation history");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for an overflowing number
    throw IoError(path + ": not valid JSON (" + e.what() + ")");
  }

  ReplayHistory history;
  history.source = path;
  std::unordered_map<std::uint64_t, IdState> ids;
  std::uint64_t live_bytes = 0;
  const json& events = event_list(doc, path);
  history.events.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& event = events[i];
    const std::string where = path + ": event " + std::to_string(i);
    if (!event.is_object()) throw IoError(where + ": expected an object, found " + event.dump());
    if (!event.contains("action") || !event["action"].is_string())
      throw IoError(where + ": missing \"action\" (\"alloc\" or \"free\")");
    const std::string action = event["action"].get<std::string>();
    // Markers of empty_cache() / reset_peak_memory_stats() calls (trace version 2): the timing
    // replay measures allocate and free only.
    if (action == "empty_cache" || action == "reset_peaks") continue;
    const std::uint64_t id = unsigned_field(event, "id", where);
    if (action == "alloc") {
      const std::uint64_t size = unsigned_field(event, "size", where);
      if (size == 0) throw IoError(where + ": \"size\" must be > 0");
      auto [it, inserted] = ids.try_emplace(id, IdState{static_cast<std::uint32_t>(ids.size()), false, 0});
      if (it->second.live) throw IoError(where + ": alloc of id " + std::to_string(id) + ", which is already live");
      it->second.live = true;
      it->second.size = size;
      live_bytes += size;
      history.peak_live_bytes = std::max(history.peak_live_bytes, live_bytes);
      ++history.alloc_count;
      history.events.push_back({ReplayEvent::Action::Alloc, it->second.slot, size});
    } else if (action == "free") {
      auto it = ids.find(id);
      if (it == ids.end() || !it->second.live)
        throw IoError(where + ": free of id " + std::to_string(id) + ", which is not live");
      it->second.live = false;
      live_bytes -= it->second.size;
      history.events.push_back({ReplayEvent::Action::Free, it->second.slot, 0});
    } else {
      throw IoError(where + ": unknown action \"" + action + "\" (expected \"alloc\", \"free\", \"empty_cache\" or \"reset_peaks\")");
    }
  }
  if (history.alloc_count == 0) throw IoError(path + ": the history has no alloc events to replay");
  history.slot_count = ids.size();
  return history;
}

}  // namespace sublet::bench
