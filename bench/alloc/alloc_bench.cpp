#include "bench/alloc/alloc_bench.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <fmt/format.h>

#include "bench/alloc/history.h"
#include "bench/alloc/tensor_workload.h"
#include "bench/alloc/workloads.h"
#include "core/errors.h"
#include "core/format_bytes.h"

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

// One tensor cell: the column's tensors over a fresh allocator of its kind, and that
// allocator's bare pairs of the same bytes.
CellResult run_tensor_cell(const AllocatorEntry& entry, const TensorShape& shape, const PairPlan& plan) {
  CellResult cell;
  cell.allocator = entry.name;
  try {
    if (!entry.make_tensors) throw Error(entry.name + " has no tensor path on this device");
    std::unique_ptr<TensorFactoryUnderTest> factory = entry.make_tensors();
    const TensorTiming t = time_tensor(*factory, shape, plan);
    cell.median_ns = t.tensor.median_ns;
    cell.p10_ns = t.tensor.p10_ns;
    cell.p90_ns = t.tensor.p90_ns;
    cell.pairs_timed = t.tensor.pairs_timed;
    cell.batches = t.tensor.batches;
    cell.allocator_pair_ns = t.pair.median_ns;
    cell.peak_reserved_bytes = factory->peak_reserved_bytes();
    cell.driver_allocation_calls = factory->driver_allocation_calls();
    cell.ok = true;
  } catch (const std::exception& e) {
    cell.error = e.what();
  }
  return cell;
}

void report_progress(std::ostream* progress, const RowResult& row) {
  if (!progress) return;
  const CellResult& c = row.cells.back();
  if (!c.ok) {
    *progress << fmt::format("  {:<24} {:<20} FAILED: {}\n", row.label, c.allocator, c.error) << std::flush;
  } else if (c.allocator_pair_ns) {
    *progress << fmt::format("  {:<24} {:<20} {:>12.1f} ns/tensor (allocator's own pair {:.1f} ns)\n", row.label,
                             c.allocator, c.median_ns, *c.allocator_pair_ns)
              << std::flush;
  } else {
    *progress << fmt::format("  {:<24} {:<20} {:>12.1f} ns/pair\n", row.label, c.allocator, c.median_ns) << std::flush;
  }
}

template <typename Workload>
void run_row(RowResult& row, const std::vector<AllocatorEntry>& entries, std::ostream* progress, Workload&& workload) {
  for (const AllocatorEntry& entry : entries) {
    row.cells.push_back(run_cell(entry, workload));
    report_progress(progress, row);
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
  o.rounds = 1;
  o.quick = true;
  return o;
}

void AllocBenchOptions::validate() const {
  if (repetitions == 0 || repetitions > kMaxRepetitions)
    throw ValueError("bench alloc: --repetitions must be from 1 to " + std::to_string(kMaxRepetitions) + ", got " +
                     std::to_string(repetitions));
  if (batch_pairs == 0) throw ValueError("bench alloc: the batch size must be at least 1 pair");
  if (rounds == 0) throw ValueError("bench alloc: --rounds must be at least 1");
  if (!(max_seconds_per_cell > 0)) throw ValueError("bench alloc: the time limit per cell must be > 0 s");
  if (device == BenchDevice::Sim && torch_plugin_path)
    throw ValueError("bench alloc --device sim: torch plugin " + *torch_plugin_path +
                     " has no simulated device (PyTorch's allocators need real memory); use --device cpu or cuda");
}

const CellResult* RowResult::cell(const std::string& allocator) const {
  for (const CellResult& c : cells)
    if (c.allocator == allocator) return &c;
  return nullptr;
}

std::optional<double> CellResult::runtime_overhead_ns() const {
  if (!ok || !allocator_pair_ns) return std::nullopt;
  return median_ns - *allocator_pair_ns;
}

std::optional<double> AllocBenchResult::ratio_to_baseline(const RowResult& row, const CellResult& cell) const {
  const CellResult* base = row.cell(baseline());
  if (row.skipped || !cell.ok || !base || !base->ok || base->median_ns <= 0) return std::nullopt;
  return cell.median_ns / base->median_ns;
}

namespace {
// An idle machine's cores run slowly until they have been busy for a while (frequency scaling, a
// virtual machine's vCPU being scheduled in): without this the first cells (sublet's 512 B pair)
// measure slower than the same cell run later. Untimed pairs on the baseline for `seconds` first.
void warm_up_processor(const AllocatorEntry& baseline, double seconds) {
  const std::unique_ptr<AllocatorUnderTest> allocator = baseline.make();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until)
    for (int i = 0; i < 1000; ++i) allocator->free(allocator->allocate(kPairSizes[i % kPairSizes.size()]));
}
// One round: every row, every allocator, once.
std::vector<RowResult> run_round(const AllocBenchOptions& options, const std::vector<AllocatorEntry>& entries,
                                 const std::optional<ReplayHistory>& history, std::ostream* progress) {
  std::vector<RowResult> rows;
  const PairPlan plan = plan_from(options);
  for (const std::size_t size : kPairSizes) {
    RowResult row;
    row.workload = "pair";
    row.size_bytes = size;
    row.label = "pair " + sublet::format_bytes(static_cast<std::int64_t>(size));
    row.peak_live_bytes = size;
    run_row(row, entries, progress, [&](AllocatorUnderTest& a) { return time_pair(a, size, plan); });
    rows.push_back(std::move(row));
  }

  for (const TensorShape& shape : kTensorShapes) {
    RowResult row;
    row.workload = "tensor";
    row.size_bytes = shape.bytes();
    row.shape = shape.sizes();
    row.label = "tensor " + shape.str() + " f32";
    row.peak_live_bytes = shape.bytes();
    if (options.device == BenchDevice::Sim) {
      row.skipped = true;
      row.skip_reason = "tensors live in cpu or cuda memory; the simulated device holds none (see --device cpu)";
    } else {
      for (const AllocatorEntry& entry : entries) {
        row.cells.push_back(run_tensor_cell(entry, shape, plan));
        report_progress(progress, row);
      }
    }
    rows.push_back(std::move(row));
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
    rows.push_back(std::move(row));
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
  rows.push_back(std::move(replay));
  return rows;
}

// Cell by cell over the rounds: the median of the rounds' medians, the spread (p10, p90) of the
// round whose median is closest to it; a cell that failed in any round fails.
void merge_rounds(std::vector<RowResult>& rows, const std::vector<std::vector<RowResult>>& rounds) {
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t c = 0; c < rows[r].cells.size(); ++c) {
      CellResult& cell = rows[r].cells[c];
      std::vector<double> medians, pair_medians;
      std::uint64_t pairs_timed = 0;
      std::size_t batches = 0;
      for (const auto& round : rounds) {
        const CellResult& other = round[r].cells[c];
        if (!other.ok && cell.ok) cell = other;  // keep the failure and its message
        medians.push_back(other.median_ns);
        if (other.allocator_pair_ns) pair_medians.push_back(*other.allocator_pair_ns);
        pairs_timed += other.pairs_timed;
        batches += other.batches;
      }
      cell.round_medians_ns = medians;
      if (!cell.ok) continue;
      cell.median_ns = median_of(medians);
      if (!pair_medians.empty()) cell.allocator_pair_ns = median_of(pair_medians);
      const CellResult* closest = &rounds.front()[r].cells[c];
      for (const auto& round : rounds)
        if (std::abs(round[r].cells[c].median_ns - cell.median_ns) < std::abs(closest->median_ns - cell.median_ns))
          closest = &round[r].cells[c];
      cell.p10_ns = closest->p10_ns;
      cell.p90_ns = closest->p90_ns;
      cell.pairs_timed = pairs_timed;
      cell.batches = batches;
    }
  }
}

}  // namespace

AllocBenchResult run_alloc_bench(const AllocBenchOptions& options, std::ostream* progress) {
  options.validate();
  // Read the history and load the plugin first: a bad file should fail before minutes of timing,
  // not after.
  std::optional<ReplayHistory> history;
  if (options.history_path) history = load_history(*options.history_path);
  const TorchPlugin* torch = options.torch_plugin_path ? &TorchPlugin::load(*options.torch_plugin_path) : nullptr;

  const std::vector<AllocatorEntry> entries = allocators_for(options.device, torch);
  AllocBenchResult result;
  result.options = options;
  for (const AllocatorEntry& e : entries)
    result.allocators.push_back({e.name, e.description, e.make_tensors ? e.tensor_description : std::string()});
  if (!options.quick) warm_up_processor(entries.front(), std::min(0.25, options.max_seconds_per_cell));

  // Rounds spread each cell over the run: shared machines have slow phases that last longer than
  // a cell (tens of milliseconds), and one round would report whichever phase a cell fell in.
  std::vector<std::vector<RowResult>> rounds;
  for (std::size_t i = 0; i < options.rounds; ++i) {
    if (progress && options.rounds > 1) *progress << "round " << i + 1 << " of " << options.rounds << "\n" << std::flush;
    rounds.push_back(run_round(options, entries, history, progress));
  }
  result.rows = rounds.front();
  merge_rounds(result.rows, rounds);
  return result;
}

}  // namespace sublet::bench
