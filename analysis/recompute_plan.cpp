#include "analysis/recompute_plan.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "core/errors.h"

namespace sublet::memory {
namespace {

constexpr std::size_t kPrefixBuckets = 2048;  // granularity of the programme's state
constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::size_t sum_retained(const std::vector<RecomputeUnit>& units) {
  std::size_t total = 0;
  for (const RecomputeUnit& u : units) total += u.retained_bytes;
  return total;
}

std::size_t fixed_bytes(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak,
                        std::optional<std::size_t> fixed) {
  if (fixed) return *fixed;
  const std::size_t retained = sum_retained(units);
  return baseline_peak > retained ? baseline_peak - retained : 0;
}

// The highest moment of recomputing run [begin, end) over what is kept before it:
// max over k of sum(retained(j), begin <= j < k) + backward(k), or with outputs for retained
// when the run is nested.
std::size_t run_moment(const std::vector<RecomputeUnit>& units, std::size_t begin, std::size_t end, bool nested) {
  std::size_t before = 0, highest = 0;
  for (std::size_t k = begin; k < end; ++k) {
    highest = std::max(highest, before + unit_backward_bytes(units[k]));
    before += nested ? units[k].output_bytes : units[k].retained_bytes;
  }
  return highest;
}

double units_ms(const std::vector<RecomputeUnit>& units, std::size_t begin, std::size_t end) {
  double ms = 0;
  for (std::size_t i = begin; i < end; ++i) ms += units[i].forward_ms;
  return ms;
}

double runs_ms(const std::vector<RecomputeUnit>& units, const std::vector<RecomputeRun>& runs) {
  double ms = 0;
  for (const RecomputeRun& r : runs) ms += (r.nested ? 2 : 1) * units_ms(units, r.begin, r.end);
  return ms;
}

std::size_t round_up(std::size_t bytes, std::size_t granule) { return (bytes + granule - 1) / granule; }

// The cheapest non-empty set of runs whose every moment fits `budget` under the model, with
// prefixes counted in granules rounded up (so what it accepts fits exactly too); nothing when no
// choice fits. best[i][p][r]: least ms over units [0, i) keeping p granules, with r = 1 once a
// run was chosen (no runs at all is the baseline, measured, not modelled).
std::optional<std::vector<RecomputeRun>> cheapest_fit(const std::vector<RecomputeUnit>& units, std::size_t fixed,
                                                      std::size_t budget, std::size_t granule) {
  if (budget < fixed) return std::nullopt;
  const std::size_t room = budget - fixed;  // for what the units hold
  const std::size_t states = room / granule + 1;
  const std::size_t n = units.size();
  struct Step { std::size_t from; std::size_t run_begin; bool run; bool nested; };
  std::vector<std::vector<double>> best(n + 1, std::vector<double>(2 * states, kInfinity));
  std::vector<std::vector<Step>> how(n + 1, std::vector<Step>(2 * states, {0, 0, false, false}));
  best[0][0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t state = 0; state < 2 * states; ++state) {
      const double cost = best[i][state];
      if (cost == kInfinity) continue;
      const std::size_t p = state / 2, ran = state % 2;
      const std::size_t kept = p * granule;  // >= the true bytes kept before unit i
      auto relax = [&](std::size_t to_i, std::size_t to_p, std::size_t to_ran, double to_cost, Step step) {
        if (to_p >= states) return;  // the start of backward would not fit
        const std::size_t to = 2 * to_p + to_ran;
        if (to_cost < best[to_i][to]) {
          best[to_i][to] = to_cost;
          how[to_i][to] = step;
        }
      };
      if (kept + unit_backward_bytes(units[i]) <= room)  // unit i as it is
        relax(i + 1, p + round_up(units[i].retained_bytes, granule), ran, cost, {state, i, false, false});
      for (const bool nested : {false, true}) {
        for (std::size_t end = i + 1; end <= n && units[end - 1].group == units[i].group; ++end) {  // run [i, end)
          if (kept + run_moment(units, i, end, nested) > room) break;  // longer runs only hold more
          if (nested && end - i < 2) continue;
          relax(end, p + round_up(units[end - 1].output_bytes, granule), 1,
                cost + (nested ? 2 : 1) * units_ms(units, i, end), {state, i, true, nested});
        }
      }
    }
  }
  std::size_t best_state = 2 * states;
  for (std::size_t state = 1; state < 2 * states; state += 2)
    if (best[n][state] < kInfinity && (best_state == 2 * states || best[n][state] < best[n][best_state])) best_state = state;
  if (best_state == 2 * states) return std::nullopt;
  std::vector<RecomputeRun> runs;
  for (std::size_t i = n, state = best_state; i > 0;) {
    const Step step = how[i][state];
    if (step.run) runs.push_back({step.run_begin, i, step.nested});
    i = step.run ? step.run_begin : i - 1;
    state = step.from;
  }
  std::reverse(runs.begin(), runs.end());
  return runs;
}

}  // namespace

std::size_t unit_backward_bytes(const RecomputeUnit& unit) {
  return unit.backward_bytes > 0 ? unit.backward_bytes : unit.retained_bytes + 2 * unit.output_bytes;
}

std::size_t run_savings(const std::vector<RecomputeUnit>& units, const RecomputeRun& run) {
  std::size_t retained = 0;
  for (std::size_t i = run.begin; i < run.end; ++i) retained += units[i].retained_bytes;
  const std::size_t output = units[run.end - 1].output_bytes;
  return retained > output ? retained - output : 0;
}

std::size_t predicted_peak(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak,
                           const std::vector<RecomputeRun>& runs, std::optional<std::size_t> fixed_part) {
  if (runs.empty()) return baseline_peak;
  const std::size_t fixed = fixed_bytes(units, baseline_peak, fixed_part);
  std::size_t kept = 0, peak = 0, i = 0;
  for (const RecomputeRun& r : runs) {
    if (r.begin < i || r.begin >= r.end || r.end > units.size() || units[r.begin].group != units[r.end - 1].group ||
        (r.nested && r.end - r.begin < 2))
      throw ValueError("predicted_peak: run [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                       ") overlaps the one before, is empty, leaves the " + std::to_string(units.size()) +
                       " units or its group, or is nested with fewer than two units");
    for (; i < r.begin; ++i) {
      peak = std::max(peak, fixed + kept + unit_backward_bytes(units[i]));
      kept += units[i].retained_bytes;
    }
    peak = std::max(peak, fixed + kept + run_moment(units, r.begin, r.end, r.nested));
    kept += units[r.end - 1].output_bytes;
    i = r.end;
  }
  for (; i < units.size(); ++i) {
    peak = std::max(peak, fixed + kept + unit_backward_bytes(units[i]));
    kept += units[i].retained_bytes;
  }
  return std::max(peak, fixed + kept);
}

RecomputeChoice choose_recompute(const std::vector<RecomputeUnit>& units, std::size_t baseline_peak, std::size_t budget,
                                 std::optional<std::size_t> fixed_part) {
  for (std::size_t i = 1; i < units.size(); ++i)
    if (units[i].group < units[i - 1].group)
      throw ValueError("choose_recompute: the units of a group must be adjacent (unit " + units[i].name + ")");
  auto finish = [&](std::vector<RecomputeRun> runs) {
    RecomputeChoice c;
    c.predicted_peak = predicted_peak(units, baseline_peak, runs, fixed_part);
    c.recompute_ms = runs_ms(units, runs);
    c.fits = c.predicted_peak <= budget;
    c.runs = std::move(runs);
    return c;
  };
  if (baseline_peak <= budget) return finish({});
  const std::size_t fixed = fixed_bytes(units, baseline_peak, fixed_part);
  // One granule for every budget tried, so that a larger budget never fits less.
  const std::size_t granule = std::bit_ceil(std::max<std::size_t>(1, (baseline_peak + kPrefixBuckets - 1) / kPrefixBuckets));
  if (auto runs = cheapest_fit(units, fixed, budget, granule)) {
    RecomputeChoice c = finish(std::move(*runs));
    if (c.fits) return c;
  }
  // Nothing fits: the smallest budget that some runs fit, by bisection over [fixed, baseline].
  std::size_t low = fixed, high = baseline_peak;
  std::optional<std::vector<RecomputeRun>> at_high;
  while (low < high) {
    const std::size_t middle = low + (high - low) / 2;
    auto runs = cheapest_fit(units, fixed, middle, granule);
    if (runs) {
      high = middle;
      at_high = std::move(runs);
    } else {
      low = middle + 1;
    }
  }
  RecomputeChoice smallest = finish(at_high ? std::move(*at_high) : std::vector<RecomputeRun>{});
  smallest.fits = smallest.predicted_peak <= budget;
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
