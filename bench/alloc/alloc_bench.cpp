#include "bench/alloc/alloc_bench.h"

#include <algorithm>
#include <exception>
#include <fmt/format.h>

#include "bench/alloc/history.h"
#include "bench/alloc/workloads.h"
#include "memory/errors.h"
#include "memory/format_bytes.h"

namespace sublet::bench {
namespace {

PairPlan plan_from(const AllocBenchOptions& o) {
  PairPlan p;
  p.warmup_pairs = o.warmup_pairs;
  p.timed_pairs = o.repetitions;
  p.batch_pairs = o.batch_pairs;
  p.max_seconds = o.max_seconds_per_cell;
  return p;
}

// Runs one workload on a fresh allocator; an allocator that throws fails its cell, not the run.
template <typename Workload>
CellResult run_cell(const AllocatorEntry& entry, Workload&& workload) {
  CellResult cell;
  cell.allocator = entry.name;
  try {
    std::unique_ptr<AllocatorUnderTest> allocator = entry.make();
    const Timing t = workload(*allocator);
    cell.median_ns = t.median_ns;
    cell.p10_ns = t.p10_ns;
    cell.p90_ns = t.p90_ns;
    cell.pairs_timed = t.pairs_timed;
    cell.batches = t.batches;
    cell.peak_reserved_bytes = allocator->peak_reserved_bytes();
    cell.driver_allocation_calls = allocator->driver_allocation_calls();
    cell.ok = true;
  } catch (const std::exception& e) {
    cell.error = e.what();
  }
  return cell;
}

template <typename Workload>
void run_row(RowResult& row, const std::vector<AllocatorEntry>& entries, std::ostream* progress, Workload&& workload) {
  for (const AllocatorEntry& entry : entries) {
    row.cells.push_back(run_cell(entry, workload));
    const CellResult& c = row.cells.back();
    if (progress)
      *progress << (c.ok ? fmt::format("  {:<24} {:<20} {:>12.1f} ns/pair\n", row.label, c.allocator, c.median_ns)
                         : fmt::format("  {:<24} {:<20} FAILED: {}\n", row.label, c.allocator, c.error))
                << std::flush;
  }
}

}  // namespace

AllocBenchOptions AllocBenchOptions::quick_options(BenchDevice device) {
  AllocBenchOptions o;
  o.device = device;
  o.repetitions = 200;
  o.batch_pairs = 20;
  o.warmup_pairs = 20;
  o.max_seconds_per_cell = 0.05;
  o.quick = true;
  return o;
}

void AllocBenchOptions::validate() const {
  if (repetitions == 0) throw ValueError("bench alloc: --repetitions must be at least 1");
  if (batch_pairs == 0) throw ValueError("bench alloc: the batch size must be at least 1 pair");
  if (!(max_seconds_per_cell > 0)) throw ValueError("bench alloc: the time limit per cell must be > 0 s");
}

const CellResult* RowResult::cell(const std::string& allocator) const {
  for (const CellResult& c : cells)
    if (c.allocator == allocator) return &c;
  return nullptr;
}

std::optional<double> AllocBenchResult::ratio_to_baseline(const RowResult& row, const CellResult& cell) const {
  const CellResult* base = row.cell(baseline());
  if (row.skipped || !cell.ok || !base || !base->ok || base->median_ns <= 0) return std::nullopt;
  return cell.median_ns / base->median_ns;
}

AllocBenchResult run_alloc_bench(const AllocBenchOptions& options, std::ostream* progress) {
  options.validate();
  // Read the history first: a bad file should fail before minutes of timing, not after.
  std::optional<ReplayHistory> history;
  if (options.history_path) history = load_history(*options.history_path);

  const std::vector<AllocatorEntry> entries = allocators_for(options.device);
  AllocBenchResult result;
  result.options = options;
  for (const AllocatorEntry& e : entries) result.allocators.push_back({e.name, e.description});
  const PairPlan plan = plan_from(options);

  for (const std::size_t size : kPairSizes) {
    RowResult row;
    row.workload = "pair";
    row.size_bytes = size;
    row.label = "pair " + memory::format_bytes(static_cast<std::int64_t>(size));
    row.peak_live_bytes = size;
    run_row(row, entries, progress, [&](AllocatorUnderTest& a) { return time_pair(a, size, plan); });
    result.rows.push_back(std::move(row));
  }

  {
    const std::size_t batch = std::max<std::size_t>(plan.batch_pairs, 1);
    const std::size_t steps = ((plan.warmup_pairs + batch - 1) / batch + (plan.timed_pairs + batch - 1) / batch) * batch;
    const ChurnSequence sequence = make_churn_sequence(options.seed, steps);
    RowResult row;
    row.workload = "churn";
    row.label = "churn";
    row.peak_live_bytes = sequence.peak_live_bytes;
    run_row(row, entries, progress, [&](AllocatorUnderTest& a) { return time_churn(a, sequence, plan); });
    result.rows.push_back(std::move(row));
  }

  RowResult replay;
  replay.workload = "replay";
  if (history) {
    replay.label = "replay";
    replay.peak_live_bytes = history->peak_live_bytes;
    run_row(replay, entries, progress, [&](AllocatorUnderTest& a) { return time_replay(a, *history, plan); });
  } else {
    replay.label = "replay";
    replay.skipped = true;
    replay.skip_reason = "no --history file given";
  }
  result.rows.push_back(std::move(replay));
  return result;
}

}  // namespace sublet::bench
