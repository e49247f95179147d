#include "torch_allocator/snapshot_pickle.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "core/atomic_write.h"
#include "memory/annotation.h"
#include "memory/history.h"
#include "profile/memory_viz_layout.h"
#include "profile/pickle_writer.h"

namespace sublet::torch_allocator {
namespace {

using profile::PickleValue;

using profile::memory_viz_stream_id;

// The frames of the stack interned as `annotation` (sublet_torch_intern_frames: one
// "filename<TAB>line<TAB>name" line per frame, innermost first), as PyTorch's snapshot lists them.
// Text in another form shows as one frame named by it.
PickleValue frames(std::uint32_t annotation) {
  PickleValue::List list;
  if (annotation == 0) return list;
  const std::string text = memory::annotation_name(annotation);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    const std::size_t tab1 = line.find('\t');
    const std::size_t tab2 = tab1 == std::string::npos ? std::string::npos : line.find('\t', tab1 + 1);
    std::int64_t number = 0;
    bool parsed = tab2 != std::string::npos && tab2 > tab1 + 1;
    for (std::size_t i = tab1 + 1; parsed && i < tab2; ++i) {
      if (line[i] < '0' || line[i] > '9' || number > (std::int64_t{1} << 40)) parsed = false;
      else number = number * 10 + (line[i] - '0');
    }
    if (parsed) {
      list.push_back(PickleValue::Dict{{"filename", line.substr(0, tab1)}, {"line", number}, {"name", line.substr(tab2 + 1)}});
    } else {
      list.push_back(PickleValue::Dict{{"filename", ""}, {"line", std::int64_t{0}}, {"name", line}});
    }
  }
  return list;
}

PickleValue segment(const memory::SegmentInfo& s, int device) {
  return profile::memory_viz_segment(s, device, [](const memory::BlockInfo& b) {
    return b.state == memory::BlockInfo::State::Inactive ? PickleValue(PickleValue::List{}) : frames(b.annotation);
  });
}

// Events that happen inside an allocation (and so in its caller's stack); frees and unmaps happen
// later, elsewhere, and carry no frames.
bool in_allocation(memory::AllocatorEventKind kind) {
  using Kind = memory::AllocatorEventKind;
  return kind == Kind::Alloc || kind == Kind::SegmentAlloc || kind == Kind::SegmentMap || kind == Kind::Oom;
}

PickleValue trace(const std::vector<memory::HistoryEvent>& events, std::size_t capacity_bytes) {
  using Kind = memory::AllocatorEventKind;
  // Frees carry the bytes their alloc requested, as in PyTorch; the allocator's event for a
  // completed free no longer knows them, so they are looked up by address.
  std::unordered_map<std::uintptr_t, std::size_t> requested;
  std::size_t reserved = 0;
  PickleValue::List list;
  for (const memory::HistoryEvent& e : events) {
    // PyTorch's traces have no entries for these markers; its viewer would not know them.
    if (e.kind == Kind::CacheEmptied || e.kind == Kind::PeaksReset) continue;
    std::size_t size = e.size;
    switch (e.kind) {
      case Kind::Alloc:
        size = e.requested_size;
        requested[e.address] = size;
        break;
      case Kind::FreeRequested:
      case Kind::FreeCompleted: {
        const auto it = requested.find(e.address);
        if (it != requested.end()) size = it->second;
        if (it != requested.end() && e.kind == Kind::FreeCompleted) requested.erase(it);
        break;
      }
      case Kind::SegmentAlloc:
      case Kind::SegmentMap: reserved += e.size; break;
      case Kind::SegmentFree:
      case Kind::SegmentUnmap: reserved -= std::min(reserved, e.size); break;
      default: break;
    }
    PickleValue::Dict entry{{"action", memory::event_kind_name(e.kind)}};
    if (e.kind == Kind::Oom) {
      // PyTorch's oom entry has the device's free bytes instead of an address.
      entry.emplace_back("device_free", static_cast<std::uint64_t>(capacity_bytes - std::min(capacity_bytes, reserved)));
    } else {
      entry.emplace_back("addr", static_cast<std::uint64_t>(e.address));
    }
    entry.emplace_back("size", static_cast<std::uint64_t>(size));
    entry.emplace_back("stream", memory_viz_stream_id(e.stream));
    entry.emplace_back("time_us", static_cast<std::int64_t>(e.time_ns / 1000));
    entry.emplace_back("frames", in_allocation(e.kind) ? frames(e.annotation) : PickleValue(PickleValue::List{}));
    list.push_back(std::move(entry));
  }
  return list;
}

PickleValue settings(const memory::AllocatorConfig& config, const std::string& backend) {
  PickleValue::Dict divisions;
  for (std::size_t i = 0; i < memory::AllocatorConfig::kRoundupIntervals; ++i)
    divisions.emplace_back(std::to_string(std::size_t{1} << i), static_cast<std::int64_t>(config.roundup_power2_divisions[i]));
  const std::string text = config.to_string();
  return PickleValue::Dict{
      {"PYTORCH_CUDA_ALLOC_CONF", text},
      {"SUBLET_ALLOC_CONF", text},
      {"max_split_size", config.max_split_size_set() ? static_cast<std::int64_t>(config.max_split_size) : std::int64_t{-1}},
      {"garbage_collection_threshold", config.garbage_collection_threshold},
      {"expandable_segments", config.expandable_segments},
      {"roundup_power2_divisions", std::move(divisions)},
      {"backend", backend}};
}

}  // namespace

std::string snapshot_pickle(const DeviceTable& table) {
  const std::vector<int> devices = table.devices();
  PickleValue::List segments;
  PickleValue::List traces;
  const int slots = devices.empty() ? 1 : devices.back() + 1;
  std::string backend = "cuda";
  for (int d = 0; d < slots; ++d) {
    memory::CachingAllocator* a = table.existing(d);
    if (!a) {
      traces.push_back(PickleValue::List{});
      continue;
    }
    // The history first: every block the segments show was then allocated before the dump
    // (events may follow, never precede, the state they describe).
    const std::vector<memory::HistoryEvent> events = table.history(d);
    for (const memory::SegmentInfo& s : a->snapshot()) segments.push_back(segment(s, d));
    memory::Backend& backend_ref = a->backend();
    backend = backend_ref.name();
    traces.push_back(trace(events, backend_ref.memory_info().total_bytes));
  }
  const memory::AllocatorConfig config = table.config_for(devices.empty() ? 0 : devices.front());
  return profile::pickle_dumps(PickleValue::Dict{{"segments", std::move(segments)},
                                                 {"device_traces", std::move(traces)},
                                                 {"allocator_settings", settings(config, backend)},
                                                 {"external_annotations", PickleValue::List{}}});
}

void write_snapshot(const std::string& path, const DeviceTable& table) {
  const std::string bytes = snapshot_pickle(table);
  io::write_atomically(path, [&](std::FILE* file) { io::write_or_throw(file, bytes.data(), bytes.size(), path); });
}

}  // namespace sublet::torch_allocator
