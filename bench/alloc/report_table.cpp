#include "bench/alloc/report_table.h"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/alloc/tensor_workload.h"
#include "core/format_bytes.h"

namespace sublet::bench {
namespace {

using Grid = std::vector<std::vector<std::string>>;  // [row][column], row 0 = header

void print_grid(const Grid& grid, std::ostream& out) {
  std::vector<std::size_t> width(grid.front().size(), 0);
  for (const auto& line : grid)
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  for (std::size_t r = 0; r < grid.size(); ++r) {
    std::string text;
    for (std::size_t c = 0; c < grid[r].size(); ++c)
      text += c == 0 ? fmt::format("{:<{}}", grid[r][c], width[c]) : fmt::format("  {:>{}}", grid[r][c], width[c]);
    out << text << "\n";
    if (r == 0) out << std::string(text.size(), '-') << "\n";
  }
}

std::string latency_cell(const AllocBenchResult& result, const RowResult& row, const CellResult& cell) {
  if (!cell.ok) return "FAILED";
  const auto ratio = result.ratio_to_baseline(row, cell);
  return fmt::format("{:.1f} ns ({})", cell.median_ns, ratio ? fmt::format("{:.2f}x", *ratio) : "-");
}

std::string cost_cell(const CellResult& cell) {
  if (!cell.ok) return "FAILED";
  const std::string peak = cell.peak_reserved_bytes ? sublet::format_bytes(static_cast<std::int64_t>(*cell.peak_reserved_bytes)) : "n/a";
  const std::string calls = cell.driver_allocation_calls ? std::to_string(*cell.driver_allocation_calls) : "n/a";
  return peak + " / " + calls;
}

// "312.4 ns (pair 41.2)": create+destroy minus the same allocator's allocate+free.
std::string overhead_cell(const CellResult& cell) {
  const auto overhead = cell.runtime_overhead_ns();
  if (!overhead) return cell.ok ? "-" : "FAILED";
  return fmt::format("{:.1f} ns (pair {:.1f})", *overhead, *cell.allocator_pair_ns);
}

Grid make_overhead_grid(const AllocBenchResult& result) {
  Grid grid;
  grid.push_back({"workload"});
  for (const AllocatorInfo& a : result.allocators) grid.front().push_back(a.name);
  for (const RowResult& row : result.rows) {
    if (row.workload != "tensor" || row.skipped) continue;
    std::vector<std::string> line{row.label};
    for (const CellResult& cell : row.cells) line.push_back(overhead_cell(cell));
    grid.push_back(std::move(line));
  }
  return grid;
}

Grid make_grid(const AllocBenchResult& result, bool latency) {
  Grid grid;
  grid.push_back({"workload"});
  for (const AllocatorInfo& a : result.allocators) grid.front().push_back(a.name);
  for (const RowResult& row : result.rows) {
    std::vector<std::string> line{row.label};
    if (row.skipped) {
      line.resize(grid.front().size(), "skipped");
    } else {
      for (const CellResult& cell : row.cells) line.push_back(latency ? latency_cell(result, row, cell) : cost_cell(cell));
    }
    grid.push_back(std::move(line));
  }
  return grid;
}

}  // namespace

GoalCheck check_goals(const AllocBenchResult& result) {
  GoalCheck g;
  g.pair_met = true;
  g.churn_met = false;
  for (const RowResult& row : result.rows) {
    const CellResult* cell = row.cell(result.baseline());
    if (row.workload == "pair") {
      const double ns = cell && cell->ok ? cell->median_ns : std::numeric_limits<double>::infinity();
      if (ns > g.worst_pair_ns) {
        g.worst_pair_ns = ns;
        g.worst_pair_size = row.size_bytes;
      }
      if (ns > kPairGoalNs) g.pair_met = false;
    } else if (row.workload == "churn") {
      g.churn_ns = cell && cell->ok ? cell->median_ns : std::numeric_limits<double>::infinity();
      g.churn_met = g.churn_ns <= kChurnGoalNs;
    } else if (row.workload == "tensor" && !row.skipped) {
      if (!g.tensor_measured) g.tensor_met = true;
      g.tensor_measured = true;
      const double ns = cell && cell->ok ? cell->median_ns : std::numeric_limits<double>::infinity();
      if (ns > g.worst_tensor_ns || g.worst_tensor_label.empty()) {
        g.worst_tensor_ns = ns;
        g.worst_tensor_label = row.label;
      }
      if (ns > kTensorGoalNs) g.tensor_met = false;
    }
  }
  // The goals are about the GPU (PyTorch's CUDA caching allocator); on the CPU "torch" is c10's
  // uncached CPU allocator.
  if (result.options.device != BenchDevice::Cuda) return g;
  for (const auto& goal : kSpeedupGoals) {
    const std::string& name = goal.first;  // no structured binding: clang 14 cannot capture one
    const double required = goal.second;
    if (std::none_of(result.allocators.begin(), result.allocators.end(), [&](const AllocatorInfo& a) { return a.name == name; }))
      continue;
    constexpr double kNone = std::numeric_limits<double>::infinity();
    GoalCheck::Speedup s{name, required, kNone, "", true, kNone, ""};
    for (const RowResult& row : result.rows) {
      const CellResult* other = row.cell(name);
      if (row.skipped || !other) continue;
      const std::optional<double> ratio = result.ratio_to_baseline(row, *other);
      const bool tensor_row = row.workload == "tensor";
      if (!ratio) {  // a failed cell on either side: the goal is not shown to be met
        if (!tensor_row) s.met = false;
        continue;
      }
      double& lowest = tensor_row ? s.lowest_tensor : s.lowest;
      std::string& where = tensor_row ? s.lowest_tensor_row : s.lowest_row;
      if (*ratio < lowest) {
        lowest = *ratio;
        where = row.label;
      }
    }
    s.met = s.met && s.lowest >= required;
    g.speedups.push_back(s);
  }
  return g;
}

void print_report(const AllocBenchResult& result, std::ostream& out) {
  const AllocBenchOptions& o = result.options;
  out << fmt::format("sublet bench alloc: device {}{}; up to {} timed pairs per cell in batches of {} after {} warm-up "
                     "pairs, at most {:g} s per cell; median of per-batch ns per pair; each cell run in {} round{}, "
                     "the median of the rounds' medians shown\n\n",
                     bench_device_name(o.device), o.quick ? " (--quick: smoke run, timings mean little)" : "",
                     o.repetitions, o.batch_pairs, o.warmup_pairs, o.max_seconds_per_cell, o.rounds,
                     o.rounds == 1 ? "" : "s");
  out << "Median ns per allocate+free pair, tensor rows per create+destroy (ratio to " << result.baseline()
      << "; > 1 is slower)\n";
  print_grid(make_grid(result, true), out);
  const Grid overhead = make_overhead_grid(result);
  if (overhead.size() > 1) {
    out << "\nTensor rows: the runtime's overhead, create+destroy minus the same allocator's allocate+free of the "
           "same bytes (timed in turn in the same cell)\n";
    print_grid(overhead, out);
  }
  out << "\nPeak reserved / driver allocation calls per row (fresh allocator per cell, warm-up included)\n";
  print_grid(make_grid(result, false), out);

  for (const RowResult& row : result.rows) {
    if (row.skipped) out << fmt::format("\n{}: skipped ({})", row.label, row.skip_reason);
    for (const CellResult& cell : row.cells)
      if (!cell.ok) out << fmt::format("\n{} / {}: {}", row.label, cell.allocator, cell.error);
  }
  const GoalCheck g = check_goals(result);
  out << fmt::format("\n\nGoals for {}: pair <= {:g} ns at every size: {} (worst {:.1f} ns at {}); churn <= {:g} ns: {} ({:.1f} ns)\n",
                     result.baseline(), kPairGoalNs, g.pair_met ? "met" : "MISSED", g.worst_pair_ns,
                     sublet::format_bytes(static_cast<std::int64_t>(g.worst_pair_size)), kChurnGoalNs,
                     g.churn_met ? "met" : "MISSED", g.churn_ns);
  if (g.tensor_measured)
    out << fmt::format("Goal for {}: tensor create+destroy <= {:g} ns: {} (worst {:.1f} ns, {})\n", result.baseline(),
                       kTensorGoalNs, g.tensor_met ? "met" : "MISSED", g.worst_tensor_ns, g.worst_tensor_label);
  for (const GoalCheck::Speedup& s : g.speedups) {
    out << fmt::format("Goal for {}: at least {:g}x faster than {} on every allocator row (pair, churn, replay): {} "
                       "(least {:.1f}x, {})",
                       result.baseline(), s.required, s.allocator, s.met ? "met" : "MISSED", s.lowest, s.lowest_row);
    if (!s.lowest_tensor_row.empty())
      out << fmt::format("; tensor rows (runtimes, sublet's own overhead in both columns): least {:.1f}x, {}",
                         s.lowest_tensor, s.lowest_tensor_row);
    out << "\n";
  }
  out << "\nAllocators:\n";
  for (const AllocatorInfo& a : result.allocators) {
    out << fmt::format("  {:<20} {}\n", a.name, a.description);
    if (!a.tensor_description.empty()) out << fmt::format("  {:<20} tensor rows: {}\n", "", a.tensor_description);
  }
  out << "n/a: not observable for that allocator (cudaMallocAsync grows its pool inside the driver; glibc's "
         "arena size is not read per call). Raw cudaMalloc's peak is the bytes requested; the driver's rounding "
         "is not observable.\n";
}

}  // namespace sublet::bench
