// The recomputation choice under a budget (memory/recompute_plan.h): on synthetic profiles the
// dynamic programme finds the optimum an exhaustive search over every set of runs finds; a fit it
// reports holds under the peak model; with no fit it gives the smallest peak reachable; budget
// texts parse or fail with a clear message.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "core/errors.h"
#include "memory/recompute_plan.h"

namespace sublet::memory {
namespace {

constexpr std::size_t kMiB = 1024 * 1024;

std::vector<RecomputeUnit> random_units(std::mt19937_64& rng, std::size_t count) {
  std::vector<RecomputeUnit> units;
  int group = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0 && rng() % 3 == 0) ++group;
    const std::size_t output = (1 + rng() % 8) * kMiB;
    units.push_back({.name = "u" + std::to_string(i), .group = group,
                     .retained_bytes = output + (rng() % 40) * kMiB, .output_bytes = output,
                     .forward_ms = 0.25 * static_cast<double>(1 + rng() % 16)});
  }
  return units;
}

// Every set of disjoint runs within groups.
void for_each_choice(const std::vector<RecomputeUnit>& units, const std::function<void(const std::vector<RecomputeRun>&)>& f) {
  std::vector<RecomputeRun> runs;
  std::function<void(std::size_t)> from = [&](std::size_t i) {
    if (i == units.size()) return f(runs);
    from(i + 1);  // unit i not checkpointed
    for (std::size_t end = i + 1; end <= units.size() && units[end - 1].group == units[i].group; ++end) {
      runs.push_back({i, end});
      from(end);
      runs.pop_back();
    }
  };
  from(0);
}

double ms_of(const std::vector<RecomputeUnit>& units, const std::vector<RecomputeRun>& runs) {
  double ms = 0;
  for (const auto& r : runs)
    for (std::size_t i = r.begin; i < r.end; ++i) ms += units[i].forward_ms;
  return ms;
}

TEST(RecomputePlan, FindsTheExhaustiveOptimumOnRandomProfiles) {
  std::mt19937_64 rng(19);
  int fitted = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto units = random_units(rng, 2 + rng() % 8);
    std::size_t activations = 0;
    for (const auto& u : units) activations += u.retained_bytes;
    const std::size_t baseline = activations + 100 * kMiB;
    const std::size_t budget = baseline - (rng() % (activations / kMiB + 1)) * kMiB;

    double best_ms = std::numeric_limits<double>::infinity();
    std::size_t smallest_peak = baseline;
    for_each_choice(units, [&](const std::vector<RecomputeRun>& runs) {
      const std::size_t peak = predicted_peak(units, baseline, runs);
      smallest_peak = std::min(smallest_peak, peak);
      if (peak <= budget) best_ms = std::min(best_ms, ms_of(units, runs));
    });

    const RecomputeChoice c = choose_recompute(units, baseline, budget);
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_EQ(c.predicted_peak, predicted_peak(units, baseline, c.runs));
    EXPECT_DOUBLE_EQ(c.recompute_ms, ms_of(units, c.runs));
    if (std::isfinite(best_ms)) {
      ++fitted;
      ASSERT_TRUE(c.fits);
      EXPECT_LE(c.predicted_peak, budget);
      EXPECT_DOUBLE_EQ(c.recompute_ms, best_ms);
    } else {
      ++refused;
      EXPECT_FALSE(c.fits);
      EXPECT_EQ(c.predicted_peak, smallest_peak);
    }
  }
  EXPECT_GT(fitted, 100);  // both cases are exercised
  EXPECT_GT(refused, 10);
}

TEST(RecomputePlan, AKnownOptimumOnAHandMadeProfile) {
  // Runs and their savings: [a] 20, [b] 20, [a,b] 50, [c] 35, [c,d] 46, [d] 6 MiB. A single run
  // never lowers the peak (its savings come back while it is recomputed); two runs do.
  const std::vector<RecomputeUnit> units = {
      {.name = "a", .group = 0, .retained_bytes = 30 * kMiB, .output_bytes = 10 * kMiB, .forward_ms = 1},
      {.name = "b", .group = 0, .retained_bytes = 30 * kMiB, .output_bytes = 10 * kMiB, .forward_ms = 2},
      {.name = "c", .group = 1, .retained_bytes = 40 * kMiB, .output_bytes = 5 * kMiB, .forward_ms = 5},
      {.name = "d", .group = 1, .retained_bytes = 8 * kMiB, .output_bytes = 2 * kMiB, .forward_ms = 0.5}};
  const std::size_t baseline = 200 * kMiB;
  // 195 MiB: [a] + [d] (200 - 26 + 20 = 194 MiB) for 1.5 ms beats [a,b] + [d] (194 MiB, 3.5 ms).
  RecomputeChoice c = choose_recompute(units, baseline, 195 * kMiB);
  ASSERT_TRUE(c.fits);
  EXPECT_EQ(c.runs, (std::vector<RecomputeRun>{{0, 1}, {3, 4}}));
  EXPECT_DOUBLE_EQ(c.recompute_ms, 1.5);
  EXPECT_EQ(c.predicted_peak, 194 * kMiB);
  // 190 MiB: [a] + [b] (200 - 40 + 20 = 180 MiB) for 3 ms; [a] + [d] no longer fits.
  c = choose_recompute(units, baseline, 190 * kMiB);
  ASSERT_TRUE(c.fits);
  EXPECT_EQ(c.runs, (std::vector<RecomputeRun>{{0, 1}, {1, 2}}));
  EXPECT_DOUBLE_EQ(c.recompute_ms, 3);
  EXPECT_EQ(c.predicted_peak, 180 * kMiB);
  // 100 MiB: nothing fits; the smallest peak reachable is every block on its own:
  // 200 - (20 + 20 + 35 + 6) + 35 = 154 MiB.
  c = choose_recompute(units, baseline, 100 * kMiB);
  EXPECT_FALSE(c.fits);
  EXPECT_EQ(c.predicted_peak, 154 * kMiB);
  EXPECT_EQ(c.runs.size(), 4u);
  // A budget above the baseline needs nothing.
  c = choose_recompute(units, baseline, 300 * kMiB);
  EXPECT_TRUE(c.fits);
  EXPECT_TRUE(c.runs.empty());
  EXPECT_EQ(c.recompute_ms, 0);
}

TEST(RecomputePlan, BudgetTexts) {
  EXPECT_EQ(parse_memory_budget("6GiB").bytes, 6ull << 30);
  EXPECT_EQ(parse_memory_budget("512MiB").bytes, 512ull << 20);
  EXPECT_EQ(parse_memory_budget("1.5GB").bytes, 1'500'000'000ull);
  EXPECT_EQ(parse_memory_budget("1048576").bytes, 1048576u);
  EXPECT_DOUBLE_EQ(parse_memory_budget("0.5").fraction, 0.5);
  EXPECT_EQ(resolve_budget(parse_memory_budget("0.5"), 1000), 500u);
  EXPECT_EQ(resolve_budget(parse_memory_budget("2KiB"), 1000), 2048u);
  for (const char* bad : {"", "abc", "-1GiB", "0", "1.5", "6 GiB", "6gb", "nan", "inf", "0.0", "1e30TiB"}) {
    try {
      parse_memory_budget(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sublet::memory
