#pragma once
// `sublet bench alloc`: every allocator of a device on every workload, one fresh allocator per
// (row, allocator) cell, ratios against sublet's default caching allocator.
// Rows: pair at 512 B, 4 KiB, 1 MiB, 8 MiB, 64 MiB, 256 MiB; tensor create+destroy at [256] and
// [1024, 1024] float32 (skipped on the simulated device, which has no tensors); churn; replay
// (skipped, and said so, without a history file).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/alloc/allocator_set.h"

namespace sublet::bench {

inline constexpr std::array<std::size_t, 6> kPairSizes = {512, 4 << 10, 1 << 20, 8 << 20, 64 << 20, 256 << 20};
// The goals `bench alloc` holds sublet's default caching allocator to (report_table.h checks them).
inline constexpr double kPairGoalNs = 100;
inline constexpr double kChurnGoalNs = 150;

// The most timed pairs a cell may ask for: the churn row lays its whole sequence out beforehand
// (16 bytes a pair), so more would fail for memory rather than measure anything.
inline constexpr std::size_t kMaxRepetitions = 10'000'000;

struct AllocBenchOptions {
  BenchDevice device = BenchDevice::Cpu;
  std::size_t repetitions = 100000;  // timed pairs per cell and round, at most kMaxRepetitions
  std::size_t rounds = 5;            // every cell runs once per round; the median of rounds is reported
  std::size_t batch_pairs = 200;
  std::size_t warmup_pairs = 1000;
  double max_seconds_per_cell = 1.0;
  std::uint64_t seed = 7;
  std::optional<std::string> history_path;
  // A torch plugin (torch_plugin.h): adds the "torch" column (PyTorch's allocator, at::empty).
  std::optional<std::string> torch_plugin_path;
  bool quick = false;

  // Tiny counts for CI smoke runs: every allocator and row runs, timings mean little.
  static AllocBenchOptions quick_options(BenchDevice device);
  // Throws ValueError for zero counts, a non-positive time limit, or a torch plugin on sim.
  void validate() const;
};

struct CellResult {
  std::string allocator;
  bool ok = false;
  std::string error;  // what the allocator threw, when !ok
  double median_ns = 0;
  double p10_ns = 0;
  double p90_ns = 0;
  std::uint64_t pairs_timed = 0;
  std::size_t batches = 0;
  std::optional<std::uint64_t> peak_reserved_bytes;
  std::optional<std::uint64_t> driver_allocation_calls;
  // Tensor rows: the same allocator's allocate+free of the tensor's bytes, timed in the same cell.
  std::optional<double> allocator_pair_ns;
  std::vector<double> round_medians_ns;  // one median per round; median_ns is their median
  // Tensor rows: what the runtime adds on top of its allocator (median_ns - allocator_pair_ns).
  std::optional<double> runtime_overhead_ns() const;
};

struct RowResult {
  std::string workload;       // "pair", "tensor", "churn", "replay"
  std::size_t size_bytes = 0;  // pair and tensor rows only
  std::vector<std::int64_t> shape;  // tensor rows only
  std::string label;          // "pair 4.00 KiB", "tensor [256] f32", "churn", "replay"
  std::uint64_t peak_live_bytes = 0;  // bytes the workload itself holds at most
  bool skipped = false;
  std::string skip_reason;
  std::vector<CellResult> cells;  // one per allocator, in AllocBenchResult::allocators order

  const CellResult* cell(const std::string& allocator) const;
};

struct AllocatorInfo {
  std::string name;
  std::string description;
  std::string tensor_description;  // what its tensor-row cells run; empty without tensors
};

struct AllocBenchResult {
  AllocBenchOptions options;
  std::vector<AllocatorInfo> allocators;  // allocators[0] is the baseline
  std::vector<RowResult> rows;

  const std::string& baseline() const { return allocators.front().name; }
  // This allocator's median over the baseline's on the same row (> 1: slower than sublet);
  // nullopt when either cell failed or the row was skipped.
  std::optional<double> ratio_to_baseline(const RowResult& row, const CellResult& cell) const;
};

// `progress` (may be null) gets one line per cell as it runs.
AllocBenchResult run_alloc_bench(const AllocBenchOptions& options, std::ostream* progress = nullptr);

}  // namespace sublet::bench
