#include "profile/layer_rows.h"

#include <algorithm>

namespace sublet::profile {

using memory::AllocatorEventKind;

StepPeak step_peak(const StepRecord& step, const Accounting& a) {
  StepPeak p;
  p.step = step.step;
  p.allocated_at_start = a.allocated_at(step.begin_event);
  p.allocated_at_end = a.allocated_at(step.end_event);
  p.peak_allocated = p.allocated_at_start;
  p.peak_event = step.begin_event;
  p.peak_reserved = a.reserved_at(step.begin_event);
  for (std::uint64_t i = step.begin_event; i < step.end_event; ++i) {
    if (a.allocated[i] > p.peak_allocated) {
      p.peak_allocated = a.allocated[i];
      p.peak_event = i;
    }
    p.peak_reserved = std::max(p.peak_reserved, a.reserved[i]);
  }
  return p;
}

std::vector<StepPeak> step_peaks(const ProfileRun& run) {
  std::vector<StepPeak> peaks;
  for (const auto& step : run.steps) peaks.push_back(step_peak(step, run.accounting));
  return peaks;
}

std::vector<LayerRow> layer_rows(const ProfileRun& run) {
  const Accounting& a = run.accounting;
  const std::vector<StepPeak> peaks = step_peaks(run);
  const std::int64_t origin_ns = run.steps.empty() ? 0 : run.steps.front().begin_ns;
  std::vector<LayerRow> rows;
  rows.reserve(run.spans.size());
  for (const Span& s : run.spans) {
    LayerRow r;
    r.step = s.step;
    r.module = s.module;
    r.type = s.type;
    r.phase = s.phase;
    r.depth = s.depth;
    r.is_leaf = s.is_leaf;
    r.begin_event = s.begin_event;
    r.end_event = s.end_event;
    r.start_ms = 1e-6 * static_cast<double>(s.begin_ns - origin_ns);
    r.duration_ms = 1e-6 * static_cast<double>(s.end_ns - s.begin_ns);
    r.allocated_at_entry = a.allocated_at(s.begin_event);
    r.allocated_at_exit = a.allocated_at(s.end_event);
    r.net = r.allocated_at_exit - r.allocated_at_entry;
    std::int64_t highest = r.allocated_at_entry;
    std::int64_t highest_by_alloc = -1;  // reached by an allocation inside the span
    for (std::uint64_t i = s.begin_event; i < s.end_event; ++i) {
      const auto& e = run.events[i];
      const auto size = static_cast<std::int64_t>(e.size);
      const std::size_t c = index_of(a.category[i]);
      if (e.kind == AllocatorEventKind::Alloc) {
        highest = std::max(highest, a.allocated[i]);
        highest_by_alloc = std::max(highest_by_alloc, a.allocated[i]);
        r.bytes_allocated += size;
        ++r.count_allocated;
        r.allocated_by_category[c] += size;
        r.net_by_category[c] += size;
      } else if (e.kind == AllocatorEventKind::FreeRequested) {
        r.bytes_freed += size;
        ++r.count_freed;
        r.net_by_category[c] -= size;
      }
      r.reserved_change += reserved_change(e);
      if (is_device_alloc(e.kind)) ++r.device_allocs;
    }
    r.peak_above_entry = highest - r.allocated_at_entry;
    // Every span in which an allocation reaches the step's peak: the leaf where it happens and
    // each span around it (and other spans reaching the same height again, if any).
    for (const StepPeak& p : peaks)
      if (p.step == s.step) r.holds_step_peak = highest_by_alloc == p.peak_allocated;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace sublet::profile
