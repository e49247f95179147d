#include "torch_allocator/snapshot_pickle.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "core/atomic_write.h"
#include "memory/history.h"
#include "profile/memory_viz_layout.h"
#include "profile/pickle_writer.h"

namespace sublet::torch_allocator {
namespace {

using profile::PickleValue;

using profile::memory_viz_stream_id;

PickleValue segment(const memory::SegmentInfo& s, int device) {
  // sublet_torch has no scopes to show: every block's frames are empty.
  return profile::memory_viz_segment(s, device, [](const memory::BlockInfo&) { return PickleValue(PickleValue::List{}); });
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
    entry.emplace_back("frames", PickleValue::List{});
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
