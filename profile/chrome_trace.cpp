#include "profile/chrome_trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/format_bytes.h"
#include "profile/output_file.h"

namespace sublet::profile {
namespace {

using nlohmann::json;
constexpr int kPid = 1;
constexpr int kStepTrack = 0;        // tid of the step slices
constexpr int kEventTrack = 1;       // tid of the allocator's instant events
constexpr int kFirstSpanTrack = 2;   // spans take tids from here

double us(std::int64_t ns) { return 1e-3 * static_cast<double>(ns); }
double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

json thread_name(int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", "thread_name"}, {"pid", kPid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// Greedy track assignment: a span goes on the first track whose open slices all contain it.
std::vector<int> assign_tracks(const std::vector<const Span*>& spans) {
  std::vector<std::vector<std::int64_t>> open_ends;  // per track: ends of the slices still open, outermost first
  std::vector<int> tracks(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& s = *spans[i];
    std::size_t t = 0;
    for (; t < open_ends.size(); ++t) {
      auto& ends = open_ends[t];
      while (!ends.empty() && ends.back() <= s.begin_ns) ends.pop_back();
      if (ends.empty() || s.end_ns <= ends.back()) break;
    }
    if (t == open_ends.size()) open_ends.emplace_back();
    open_ends[t].push_back(s.end_ns);
    tracks[i] = kFirstSpanTrack + static_cast<int>(t);
  }
  return tracks;
}

}  // namespace

void write_chrome_trace(const std::string& path, const ProfileRun& run, const std::vector<LayerRow>& rows) {
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", kPid},
                    {"args", {{"name", "sublet profile: " + run.options.model_name + " on " + run.options.device.str()}}}});
  events.push_back(thread_name(kStepTrack, "steps"));
  events.push_back(thread_name(kEventTrack, "allocator events"));

  for (const StepRecord& s : run.steps) {
    events.push_back({{"ph", "X"}, {"name", "step " + std::to_string(s.step)}, {"cat", "step"}, {"pid", kPid},
                      {"tid", kStepTrack}, {"ts", us(s.begin_ns)}, {"dur", us(s.end_ns - s.begin_ns)},
                      {"args", {{"peak_allocated", s.live_peak_allocated}, {"peak_reserved", s.live_peak_reserved}}}});
  }

  // Spans sorted by start, outer before inner, so that the track assignment sees parents first.
  std::vector<std::size_t> order(run.spans.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const Span& x = run.spans[a];
    const Span& y = run.spans[b];
    if (x.begin_ns != y.begin_ns) return x.begin_ns < y.begin_ns;
    return x.end_ns > y.end_ns;
  });
  std::vector<const Span*> sorted;
  for (std::size_t i : order) sorted.push_back(&run.spans[i]);
  const std::vector<int> tracks = assign_tracks(sorted);
  int max_track = kFirstSpanTrack;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Span& s = run.spans[order[k]];
    const LayerRow& r = rows[order[k]];
    max_track = std::max(max_track, tracks[k]);
    events.push_back({{"ph", "X"}, {"name", s.module + " " + phase_name(s.phase)}, {"cat", phase_name(s.phase)},
                      {"pid", kPid}, {"tid", tracks[k]}, {"ts", us(s.begin_ns)},
                      {"dur", std::max(0.0, us(s.end_ns - s.begin_ns))},
                      {"args", {{"module", s.module}, {"type", s.type}, {"step", s.step},
                                {"allocated_at_entry", r.allocated_at_entry}, {"net", r.net},
                                {"peak_above_entry", r.peak_above_entry}, {"bytes_allocated", r.bytes_allocated},
                                {"reserved_change", r.reserved_change}, {"holds_step_peak", r.holds_step_peak}}}});
  }
  for (int t = kFirstSpanTrack; t <= max_track; ++t) events.push_back(thread_name(t, "modules " + std::to_string(t - kFirstSpanTrack)));

  const Accounting& a = run.accounting;
  for (std::size_t i = 0; i < run.events.size(); ++i) {
    const memory::HistoryEvent& e = run.events[i];
    const double ts = us(e.time_ns);
    const bool block_event = e.kind == memory::AllocatorEventKind::Alloc || e.kind == memory::AllocatorEventKind::FreeRequested;
    const bool reserved_event = reserved_change(e) != 0;
    if (block_event || reserved_event) {
      events.push_back({{"ph", "C"}, {"name", "memory (MiB)"}, {"pid", kPid}, {"ts", ts},
                        {"args", {{"allocated", mib(a.allocated[i])}, {"reserved", mib(a.reserved[i])}}}});
    }
    if (block_event) {
      json by_category = json::object();
      for (std::size_t c = 0; c < kNumCategories; ++c) by_category[category_label(Category(c))] = mib(a.live_by_category[i][c]);
      events.push_back({{"ph", "C"}, {"name", "allocated by category (MiB)"}, {"pid", kPid}, {"ts", ts}, {"args", by_category}});
    }
    if (!block_event && e.kind != memory::AllocatorEventKind::FreeCompleted) {
      const bool oom = e.kind == memory::AllocatorEventKind::Oom;
      events.push_back({{"ph", "i"}, {"name", std::string(memory::event_kind_name(e.kind)) + " " +
                                                  sublet::format_bytes(static_cast<std::int64_t>(e.size))},
                        {"cat", "allocator"}, {"s", oom ? "g" : "t"}, {"pid", kPid}, {"tid", kEventTrack}, {"ts", ts},
                        {"args", {{"address", e.address}, {"size", e.size}, {"requested_size", e.requested_size}}}});
    }
  }
  const json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"},
                    {"otherData", {{"model", run.options.model_name}, {"device", run.options.device.str()},
                                   {"allocator_config", run.allocator_config}}}};
  write_text_file(path, doc.dump() + "\n");
}

}  // namespace sublet::profile
