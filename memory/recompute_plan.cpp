#include "memory/recompute_plan.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "core/errors.h"

namespace sublet::memory {
namespace {

// Buckets of the savings dimension: enough that rounding loses at most 1/2048 of the need.
constexpr std::size_t kSavingsBuckets = 2048;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Candidate {
  RecomputeRun run;
  std::size_t savings = 0;
  double ms = 0;
};

std::vector<Candidate> candidate_runs(const std::vector<RecomputeUnit>& units) {
  std::vector<Candidate> out;
  for (std::size_t begin = 0; begin < units.size(); ++begin) {
    double ms = 0;
    for (std::size_t end = begin + 1; end <= units.size() && units[end - 1].group == units[begin].group; ++end) {
      ms += units[end - 1].forward_ms;
      const RecomputeRun run{begin, end};
      const std::size_t savings = run_savings(units, run);
      if (savings > 0) out.push_back({run, savings, ms});
    }
  }
  return out;
}

// Among runs with savings <= cap: the cheapest set whose savings reach `need` (rounded down to
// `granule`), or, with need = 0 and maximize_savings, the set of the largest savings. Returns
// the runs, or nothing when no set reaches `need`.
struct Selection {
  bool found = false;
  std::vector<RecomputeRun> runs;
};

Selection cheapest_cover(std::size_t unit_count, const std::vector<Candidate>& candidates, std::size_t cap,
                         std::size_t need) {
  const std::size_t granule = std::bit_ceil(std::max<std::size_t>(1, (need + kSavingsBuckets - 1) / kSavingsBuckets));
  const std::size_t target = (need + granule - 1) / granule;  // buckets that must be covered
  // best[i][s]: least ms over units [0, i) with min(target, savings buckets) == s.
  std::vector<std::vector<double>> best(unit_count + 1, std::vector<double>(target + 1, kInfinity));
  struct Step { std::size_t from_s; int candidate; };  // candidate -1: unit i-1 not checkpointed
  std::vector<std::vector<Step>> how(unit_count + 1, std::vector<Step>(target + 1, {0, -2}));
  std::vector<std::vector<int>> ending_at(unit_count + 1);
  for (std::size_t c = 0; c < candidates.size(); ++c)
    if (candidates[c].savings <= cap) ending_at[candidates[c].run.end].push_back(static_cast<int>(c));
  best[0][0] = 0;
  for (std::size_t i = 1; i <= unit_count; ++i) {
    for (std::size_t s = 0; s <= target; ++s) {
      if (best[i - 1][s] < best[i][s]) {
        best[i][s] = best[i - 1][s];
        how[i][s] = {s, -1};
      }
    }
    for (int c : ending_at[i]) {
      const Candidate& k = candidates[static_cast<std::size_t>(c)];
      const std::size_t gain = k.savings / granule;
      for (std::size_t s = 0; s <= target; ++s) {
        const double from = best[k.run.begin][s];
        if (from == kInfinity) continue;
        const std::size_t to = std::min(target, s + gain);
        if (from + k.ms < best[i][to]) {
          best[i][to] = from + k.ms;
          how[i][to] = {s, c};
        }
      }
    }
  }
  Selection result;
  if (best[unit_count][target] == kInfinity) return result;
  result.found = true;
  for (std::size_t i = unit_count, s = target; i > 0;) {
    const Step step = how[i][s];
    if (step.candidate == -1) {
      --i;
    } else {
      const Candidate& k = candidates[static_cast<std::size_t>(step.candidate)];
      result.runs.push_back(k.run);
      i = k.run.begin;
    }
    s = step.from_s;
  }
  std::reverse(result.runs.begin(), result.runs.end());
  return result;
}

// The set of runs with savings <= cap whose total savings are largest (no overlaps): a weighted
// interval schedule over the blocks.
std::vector<RecomputeRun> largest_savings(std::size_t unit_count, const std::vector<Candidate>& candidates,
                                          std::size_t cap) {
  std::vector<std::size_t> best(unit_count + 1, 0);
  std::vector<int> how(unit_count + 1, -1);
  for (std::size_t i = 1; i <= unit_count; ++i) {
    best[i] = best[i - 1];
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const Candidate& k = candidates[c];
      if (k.run.end != i || k.savings > cap) continue;
      if (best[k.run.begin] + k.savings > best[i]) {
        best[i] = best[k.run.begin] + k.savings;
        how[i] = static_cast<int>(c);
      }
    }
  }
  std::vector<RecomputeRun> runs;
  for (std::size_t i = unit_count; i > 0;) {
    if (best[i] == best[i - 1] || how[i] < 0) {
      --i;
      continue;
    }
    runs.push_back(candidates[static_cast<std::size_t>(how[i])].run);
    i = runs.back().begin;
  }
  std::reverse(runs.begin(), runs.end());
  return runs;
}

double runs_ms(const std::vector<RecomputeUnit>& units, const std::vector<RecomputeRun>& runs) {
  double ms = 0;
  for (const RecomputeRun& r : runs)
    for (std::size_t i = r.begin; i < r.end; ++i) ms += units[i].forward_ms;
  return ms;
}

}  // namespace

std::size_t run_savings(const std::vector<RecomputeUnit>& units, const RecomputeRun& run) {
  std::size_t retained = 0;
  for (std::size_t i = run.begin; i < run.end; ++i) retained += units[i].retained_bytes;
  const std::size_t output = units[run.end - 1].output_bytes;
  return retained > output ? retained - output : 0;
}

std::size_t predicted_peak(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak,
                           const std::vector<RecomputeRun>& runs) {
  std::size_t total = 0, largest = 0;
  for (const RecomputeRun& r : runs) {
    const std::size_t s = run_savings(units, r);
    total += s;
    largest = std::max(largest, s);
  }
  return baseline_peak - std::min(baseline_peak, total) + largest;
}

RecomputeChoice choose_recompute(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak, std::size_t budget) {
  for (std::size_t i = 1; i < units.size(); ++i)
    if (units[i].group < units[i - 1].group)
      throw ValueError("choose_recompute: the units of a group must be adjacent (unit " + units[i].name + ")");
  auto finish = [&](std::vector<RecomputeRun> runs) {
    RecomputeChoice c;
    c.predicted_peak = predicted_peak(units, baseline_peak, runs);
    c.recompute_ms = runs_ms(units, runs);
    c.fits = c.predicted_peak <= budget;
    c.runs = std::move(runs);
    return c;
  };
  if (baseline_peak <= budget) return finish({});
  const std::vector<Candidate> candidates = candidate_runs(units);
  std::set<std::size_t> caps;
  for (const Candidate& k : candidates) caps.insert(k.savings);

  std::optional<RecomputeChoice> best;
  for (std::size_t cap : caps) {
    if (baseline_peak + cap <= budget) continue;  // would need nothing: covered by the no-run case above
    const Selection s = cheapest_cover(units.size(), candidates, cap, baseline_peak + cap - budget);
    if (!s.found) continue;
    RecomputeChoice c = finish(s.runs);
    if (!c.fits) continue;  // cannot happen by construction; kept as a guard on the rounding
    if (!best || c.recompute_ms < best->recompute_ms ||
        (c.recompute_ms == best->recompute_ms && c.predicted_peak < best->predicted_peak))
      best = std::move(c);
  }
  if (best) return *best;
  // Nothing fits: the smallest peak reachable.
  RecomputeChoice smallest = finish({});
  for (std::size_t cap : caps) {
    RecomputeChoice c = finish(largest_savings(units.size(), candidates, cap));
    if (c.predicted_peak < smallest.predicted_peak) smallest = std::move(c);
  }
  return smallest;
}

MemoryBudget parse_memory_budget(const std::string& text) {
  auto bad = [&] {
    return ValueError("--memory-budget: expected a size with a unit (6GiB, 512MiB, 1.5GB, or bytes) or a fraction in "
                      "(0, 1] of the measured peak (0.5), got '" + text + "'");
  };
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    throw bad();
  }
  if (!std::isfinite(value) || value <= 0) throw bad();
  const std::string unit = text.substr(used);
  MemoryBudget b;
  if (unit.empty() && text.find_first_of(".eE") != std::string::npos) {
    if (value > 1) throw bad();
    b.fraction = value;
    return b;
  }
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"", 1.0}, {"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = value * scale;
    if (bytes < 1 || bytes > 1e18) throw bad();
    b.bytes = static_cast<std::size_t>(bytes);
    return b;
  }
  throw bad();
}

std::size_t resolve_budget(const MemoryBudget& budget, std::size_t measured_peak) {
  if (budget.fraction > 0) return static_cast<std::size_t>(budget.fraction * static_cast<double>(measured_peak));
  return budget.bytes;
}

}  // namespace sublet::memory
