#pragma once
// Recomputation under a memory budget: which runs of blocks to checkpoint (nn::checkpoint) so
// that a training step's peak fits a budget for the least extra forward time.
// Pure arithmetic over measured numbers; models/resnet_recompute.h measures and applies.
//
// The model follows backward through the units. What stays allocated between forward and backward
// is, per unit, kept(i): its retained bytes (saved activations and output) when it is not
// recomputed; for a recomputed run [begin, end), the output of its last unit only (the run's input
// is kept by the unit before it). `fixed` is what is allocated throughout: parameters, optimizer
// state, the batch (measured; when not given, baseline_peak - sum(retained), an overestimate by
// whatever else was live at the baseline's peak). Backward passes three kinds of moments:
//   - its start: fixed + sum(kept);
//   - the backward of a unit k that is not recomputed: fixed + sum(kept(i), i < k) + backward(k);
//   - the backward of unit k of a recomputed run [b, e): the run's units b..k-1 have been
//     recomputed and not yet backpropagated (those after k are done and freed):
//     fixed + sum(kept(i), i < b) + sum(retained(j), b <= j < k) + backward(k),
// where backward(k) = backward_bytes, what unit k holds at most over its forward and backward on
// its own (its activations, the gradient of its output, the gradients in flight, workspaces) plus
// the parameter gradients that exist by then.
//     predicted_peak(S) = the largest of these (baseline_peak itself when nothing is recomputed).
// Units after a run are freed by the time it is recomputed: this is what lets many small runs
// reach far lower peaks than "every saving counted as live at once" would admit.
// Cost: the forward time of every unit in a run, once more per step (twice for a nested run).
//
// The choice is exact for that model up to a granularity (kept bytes are rounded up to multiples
// of about baseline_peak / 2048, so a reported fit holds): a dynamic programme over the units
// whose state is sum(kept) so far finds the cheapest set of runs all of whose moments fit. Runs
// never cross groups (a group is one nn::Sequential). With no fit, a bisection over the budget
// finds the smallest peak reachable.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace sublet::memory {

struct RecomputeUnit {
  std::string name;                // e.g. "layer1.0"
  int group = 0;                   // runs stay within one group; units of a group are adjacent
  std::size_t retained_bytes = 0;  // bytes its forward leaves allocated (saved activations + output)
  std::size_t output_bytes = 0;
  double forward_ms = 0;
  // The most bytes live over its forward and backward on its own above what was allocated before
  // (the gradient of its output included), plus the gradients of the parameters after it; 0 when
  // not measured: estimated as retained + 2 * output (the output's gradient and one in flight).
  std::size_t backward_bytes = 0;
};

// backward_bytes, or its estimate when not measured.
std::size_t unit_backward_bytes(const RecomputeUnit& unit);

struct RecomputeRun {
  std::size_t begin = 0, end = 0;  // units [begin, end)
  // Nested (two or more units): inside the run's recomputation each unit is itself recomputed on
  // its own, so that recomputation keeps the units' outputs only (Chen et al.'s recursion one
  // level deep): twice the run's forward time, for moments of
  // fixed + kept before + sum(output(j), begin <= j < k) + backward(k).
  bool nested = false;
  bool operator==(const RecomputeRun&) const = default;
};

struct RecomputeChoice {
  std::vector<RecomputeRun> runs;   // in unit order, disjoint
  std::size_t predicted_peak = 0;   // by the model above
  double recompute_ms = 0;          // extra forward time per step
  bool fits = false;                // predicted_peak <= budget; when false, `runs` is the
                                    // choice with the smallest predicted peak
};

// What a run frees between forward and backward: its units' retained bytes less its output.
std::size_t run_savings(const std::vector<RecomputeUnit>& units, const RecomputeRun& run);
// The model above (fixed_bytes: `fixed`, when measured); ValueError for runs that overlap, are
// out of order or cross a group.
std::size_t predicted_peak(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak,
                           const std::vector<RecomputeRun>& runs, std::optional<std::size_t> fixed_bytes = std::nullopt);

// The cheapest choice that fits `budget` (fewest extra milliseconds; on ties, the least kept at
// the start of backward), or the cheapest choice of the smallest peak reachable, fits = false.
RecomputeChoice choose_recompute(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak, std::size_t budget,
                                 std::optional<std::size_t> fixed_bytes = std::nullopt);

// "6GiB", "512MiB", "1.5GB", "1048576" (bytes), or a fraction in (0, 1] of `measured_peak`
// ("0.5"). ValueError naming the text otherwise.
struct MemoryBudget {
  std::size_t bytes = 0;
  double fraction = 0;  // > 0 when given as a fraction
};
MemoryBudget parse_memory_budget(const std::string& text);
std::size_t resolve_budget(const MemoryBudget& budget, std::size_t measured_peak);

}  // namespace sublet::memory
