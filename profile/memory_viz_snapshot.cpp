#include "profile/memory_viz_snapshot.h"

#include <unordered_map>

#include "memory/annotation.h"
#include "memory/config.h"
#include "profile/memory_viz_layout.h"
#include "profile/output_file.h"

namespace sublet::profile {
namespace {

PickleValue frames(std::uint32_t annotation, Category category) {
  const std::string where = annotation == 0 ? std::string("(no scope)") : memory::annotation_name(annotation);
  return PickleValue::List{PickleValue::Dict{{"filename", where}, {"line", 0}, {"name", category_label(category)}}};
}

PickleValue segments(const ProfileRun& run) {
  const std::int64_t device = run.options.device.is_cpu() ? 0 : run.options.device.index;
  PickleValue::List list;
  for (const memory::SegmentInfo& s : run.final_segments) {
    list.push_back(memory_viz_segment(s, device, [](const memory::BlockInfo& b) {
      const bool active = b.state != memory::BlockInfo::State::Inactive;
      return active ? frames(b.annotation, report_category(b.category)) : PickleValue(PickleValue::List{});
    }));
  }
  return list;
}

PickleValue device_trace(const ProfileRun& run) {
  PickleValue::List trace;
  for (std::size_t i = 0; i < run.events.size(); ++i) {
    const memory::HistoryEvent& e = run.events[i];
    // PyTorch's trace has no actions for these markers (its viewer would not know them).
    if (e.kind == memory::AllocatorEventKind::CacheEmptied || e.kind == memory::AllocatorEventKind::PeaksReset) continue;
    const bool block_event = e.kind == memory::AllocatorEventKind::Alloc || e.kind == memory::AllocatorEventKind::FreeRequested ||
                             e.kind == memory::AllocatorEventKind::FreeCompleted;
    PickleValue::Dict entry{{"action", memory::event_kind_name(e.kind)},
                            {"addr", static_cast<std::uint64_t>(e.address)},
                            {"size", static_cast<std::uint64_t>(e.size)},
                            {"stream", memory_viz_stream_id(e.stream)},
                            {"time_us", e.time_ns / 1000},
                            {"frames", block_event ? frames(e.annotation, run.accounting.category[i]) : PickleValue(PickleValue::List{})}};
    if (e.kind == memory::AllocatorEventKind::Oom) {
      entry.emplace_back("device_free", static_cast<std::uint64_t>(run.device_capacity - run.accounting.reserved_at(i)));
    }
    trace.push_back(std::move(entry));
  }
  return PickleValue::List{PickleValue(std::move(trace))};
}

PickleValue allocator_settings(const ProfileRun& run) {
  const memory::AllocatorConfig config = memory::AllocatorConfig::parse(run.allocator_config);
  return PickleValue::Dict{
      {memory::kSubletAllocConf, run.allocator_config},
      {memory::kPytorchAllocConf, run.allocator_config},
      {"max_split_size", config.max_split_size_set() ? static_cast<std::int64_t>(config.max_split_size) : std::int64_t{-1}},
      {"garbage_collection_threshold", config.garbage_collection_threshold},
      {"expandable_segments", config.expandable_segments},
      {"backend", run.backend_name}};
}

}  // namespace

PickleValue memory_viz_snapshot(const ProfileRun& run) {
  return PickleValue::Dict{{"segments", segments(run)},
                           {"device_traces", device_trace(run)},
                           {"allocator_settings", allocator_settings(run)}};
}

void write_memory_viz_snapshot(const std::string& path, const ProfileRun& run) {
  write_text_file(path, pickle_dumps(memory_viz_snapshot(run)));
}

}  // namespace sublet::profile
