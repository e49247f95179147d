#pragma once
// The layer table: one row per (step, module, phase) with what happened to memory inside it,
// computed from the history between the span's two marks.
#include <cstdint>
#include <string>
#include <vector>

#include "profile/category_accounting.h"
#include "profile/layer_recorder.h"
#include "profile/profile_session.h"

namespace sublet::profile {

struct LayerRow {
  int step = 0;
  std::string module, type;
  Phase phase = Phase::Forward;
  int depth = 0;
  bool is_leaf = true;
  double start_ms = 0, duration_ms = 0;  // from the first step's start
  std::int64_t allocated_at_entry = 0, allocated_at_exit = 0;
  std::int64_t net = 0;               // exit - entry
  std::int64_t peak_above_entry = 0;  // highest allocated inside the span, minus entry (>= 0)
  std::int64_t bytes_allocated = 0, count_allocated = 0;
  std::int64_t bytes_freed = 0, count_freed = 0;
  std::int64_t reserved_change = 0;
  std::int64_t device_allocs = 0;     // segments allocated or mapped while the span was open
  CategoryBytes allocated_by_category{};  // bytes this span asked for, by final category
  CategoryBytes net_by_category{};        // allocated minus freed, by category
  bool holds_step_peak = false;       // the step's highest allocated is reached inside this span
  std::uint64_t begin_event = 0, end_event = 0;

  std::int64_t peak() const { return allocated_at_entry + peak_above_entry; }
};

struct StepPeak {
  int step = 0;
  std::int64_t peak_allocated = 0;
  std::uint64_t peak_event = 0;  // the first alloc event that reaches it (its index)
  std::int64_t peak_reserved = 0;
  std::int64_t allocated_at_start = 0, allocated_at_end = 0;
};

StepPeak step_peak(const StepRecord& step, const Accounting& accounting);
std::vector<LayerRow> layer_rows(const ProfileRun& run);
std::vector<StepPeak> step_peaks(const ProfileRun& run);

}  // namespace sublet::profile
