// The recomputation choice under a budget (analysis/recompute_plan.h): on synthetic profiles the
// dynamic programme finds the optimum an exhaustive search over every set of runs finds; a fit it
// reports holds under the peak model; with no fit it gives the smallest peak reachable; the peak
// model follows backward (a run's later units are freed when it is recomputed); budget texts
// parse or fail with a clear message.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "analysis/recompute_plan.h"
#include "core/errors.h"

namespace sublet::memory {
namespace {

constexpr std::size_t kMiB = 1024 * 1024;

std::vector<RecomputeUnit> random_units(std::mt19937_64& rng, std::size_t count) {
  std::vector<RecomputeUnit> units;
  int group = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0 && rng() % 3 == 0) ++group;
    const std::size_t output = (1 + rng() % 8) * kMiB;
    const std::size_t retained = output + (rng() % 40) * kMiB;
    // Measured (its activations, the output's gradient and some in flight), or left to the estimate.
    const std::size_t backward = rng() % 2 ? retained + output + (rng() % 20) * kMiB : 0;
    units.push_back({.name = "u" + std::to_string(i), .group = group, .retained_bytes = retained,
                     .output_bytes = output, .forward_ms = 0.25 * static_cast<double>(1 + rng() % 16),
                     .backward_bytes = backward});
  }
  return units;
}

// Every set of disjoint runs within groups, nested or not.
void for_each_choice(const std::vector<RecomputeUnit>& units, const std::function<void(const std::vector<RecomputeRun>&)>& f) {
  std::vector<RecomputeRun> runs;
  std::function<void(std::size_t)> from = [&](std::size_t i) {
    if (i == units.size()) return f(runs);
    from(i + 1);  // unit i not checkpointed
    for (std::size_t end = i + 1; end <= units.size() && units[end - 1].group == units[i].group; ++end) {
      for (const bool nested : {false, true}) {
        if (nested && end - i < 2) continue;
        runs.push_back({i, end, nested});
        from(end);
        runs.pop_back();
      }
    }
  };
  from(0);
}

double ms_of(const std::vector<RecomputeUnit>& units, const std::vector<RecomputeRun>& runs) {
  double ms = 0;
  for (const auto& r : runs)
    for (std::size_t i = r.begin; i < r.end; ++i) ms += (r.nested ? 2 : 1) * units[i].forward_ms;
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
  // fixed = 210 - 108 = 102 MiB. With nothing recomputed, the peak is the baseline, 210 MiB.
  const std::vector<RecomputeUnit> units = {
      {.name = "a", .group = 0, .retained_bytes = 30 * kMiB, .output_bytes = 10 * kMiB, .forward_ms = 1,
       .backward_bytes = 42 * kMiB},
      {.name = "b", .group = 0, .retained_bytes = 30 * kMiB, .output_bytes = 10 * kMiB, .forward_ms = 2,
       .backward_bytes = 42 * kMiB},
      {.name = "c", .group = 1, .retained_bytes = 40 * kMiB, .output_bytes = 5 * kMiB, .forward_ms = 5,
       .backward_bytes = 47 * kMiB},
      {.name = "d", .group = 1, .retained_bytes = 8 * kMiB, .output_bytes = 2 * kMiB, .forward_ms = 0.5,
       .backward_bytes = 12 * kMiB}};
  const std::size_t baseline = 210 * kMiB;
  // [a] alone: the start of backward holds 102 + 10 + 30 + 40 + 8 = 190 MiB; the backward of d
  // 102 + 80 + 12 = 194, of c 102 + 40 + 47 = 189, of b 102 + 10 + 42 = 154; a's recomputation
  // (b, c and d freed by then) 102 + 42 = 144. The peak is d's backward, 194 MiB (a model with
  // every saving live at once would say a single run never lowers the peak).
  RecomputeChoice c = choose_recompute(units, baseline, 200 * kMiB);
  ASSERT_TRUE(c.fits);
  EXPECT_EQ(c.runs, (std::vector<RecomputeRun>{{0, 1}}));
  EXPECT_DOUBLE_EQ(c.recompute_ms, 1);
  EXPECT_EQ(c.predicted_peak, 194 * kMiB);
  // 180 MiB: a and b recomputed, as one run or two (3 ms either way): 174 MiB, d's backward.
  c = choose_recompute(units, baseline, 180 * kMiB);
  ASSERT_TRUE(c.fits);
  EXPECT_DOUBLE_EQ(c.recompute_ms, 3);
  EXPECT_EQ(c.predicted_peak, 174 * kMiB);
  EXPECT_EQ(c.runs.front().begin, 0u);
  EXPECT_EQ(c.runs.back().end, 2u);
  // 170 MiB: [a] + [b] + [c] would do (169 MiB, 8 ms), but a nested [a-b] does it for 6 ms: it keeps
  // b's output only and recomputes a and b on their own inside, moments 102 + 42 (a) and
  // 102 + 10 + 42 (b); then c's backward 102 + 10 + 47, d's 102 + 50 + 12 = 164 MiB.
  c = choose_recompute(units, baseline, 170 * kMiB);
  ASSERT_TRUE(c.fits);
  EXPECT_EQ(c.runs, (std::vector<RecomputeRun>{{0, 2, true}}));
  EXPECT_DOUBLE_EQ(c.recompute_ms, 6);
  EXPECT_EQ(c.predicted_peak, 164 * kMiB);
  EXPECT_EQ(predicted_peak(units, baseline, {{0, 2, false}}), 174 * kMiB) << "not nested: b's moment 102 + 30 + 42";
  // 160 MiB: c recomputed as well, 159 MiB (c's recomputation 102 + 10 + 47), 11 ms.
  c = choose_recompute(units, baseline, 160 * kMiB);
  ASSERT_TRUE(c.fits);
  EXPECT_EQ(c.runs, (std::vector<RecomputeRun>{{0, 2, true}, {2, 3}}));
  EXPECT_DOUBLE_EQ(c.recompute_ms, 11);
  EXPECT_EQ(c.predicted_peak, 159 * kMiB);
  // 150 MiB: nothing fits; the smallest peak reachable is that one.
  c = choose_recompute(units, baseline, 150 * kMiB);
  EXPECT_FALSE(c.fits);
  EXPECT_EQ(c.predicted_peak, 159 * kMiB);
  EXPECT_DOUBLE_EQ(c.recompute_ms, 11);
  EXPECT_THROW(predicted_peak(units, baseline, {{2, 3, true}}), ValueError) << "nested needs two units";
  // Recomputing can raise the peak: [d] alone is recomputed when a, b and c are all kept.
  EXPECT_EQ(predicted_peak(units, baseline, {{3, 4}}), 214 * kMiB);
  // Overlapping or group-crossing runs are not a choice.
  EXPECT_THROW(predicted_peak(units, baseline, {{0, 2}, {1, 2}}), ValueError);
  EXPECT_THROW(predicted_peak(units, baseline, {{1, 3}}), ValueError);
  // A measured fixed part (here 2 MiB of the baseline were gradients in flight, not fixed) moves
  // every moment by the difference; the baseline itself stays what was measured.
  EXPECT_EQ(predicted_peak(units, baseline, {{0, 1}}, 100 * kMiB), 192 * kMiB);
  c = choose_recompute(units, baseline, 192 * kMiB, 100 * kMiB);
  ASSERT_TRUE(c.fits);
  EXPECT_EQ(c.runs, (std::vector<RecomputeRun>{{0, 1}}));
  EXPECT_EQ(c.predicted_peak, 192 * kMiB);
  EXPECT_EQ(predicted_peak(units, baseline, {}, 100 * kMiB), baseline);
  // A budget above the baseline needs nothing.
  c = choose_recompute(units, baseline, 300 * kMiB);
  EXPECT_TRUE(c.fits);
  EXPECT_TRUE(c.runs.empty());
  EXPECT_EQ(c.recompute_ms, 0);
  EXPECT_EQ(c.predicted_peak, baseline);
}

TEST(RecomputePlan, UnmeasuredBackwardBytesAreEstimated) {
  EXPECT_EQ(unit_backward_bytes({.retained_bytes = 30, .output_bytes = 10}), 50u);
  EXPECT_EQ(unit_backward_bytes({.retained_bytes = 30, .output_bytes = 10, .backward_bytes = 44}), 44u);
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
