// `--memory-budget` is a bound: a run with a budget of a fraction f peaks (allocated) at no more
// than f times the same run's peak without one, and never above the budget it reports. The
// fractions step through the range where recomputation can fit; one that nothing fits is refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

struct Run {
  std::size_t peak = 0;  // allocated, over the run's epochs (evaluation included)
  std::optional<Trainer::MemoryBudgetFit> fit;
};

Run train(const TrainOptions& options) {
  Trainer trainer(options);
  Run run;
  for (const EpochMetrics& m : trainer.fit()) run.peak = std::max(run.peak, m.peak_allocated_bytes);
  run.fit = trainer.memory_budget_fit();
  EXPECT_GT(run.peak, 0u);
  return run;
}

// Every fraction that fits keeps the run's peak within its budget and within fraction x the
// unbudgeted run's peak: the budget's base is measured as the step really runs, never above it
// (an overestimated base lets the peak pass the fraction while it stays under the budget's bytes).
// At least `min_fitting` of the fractions fit.
void expect_budgets_bound_the_peak(TrainOptions options, const std::vector<double>& fractions, int min_fitting) {
  const std::size_t unbudgeted = train(options).peak;
  int fitting = 0;
  for (const double fraction : fractions) {
    options.memory_budget = std::to_string(fraction);
    try {
      const Run run = train(options);
      ASSERT_TRUE(run.fit.has_value());
      ++fitting;
      std::printf("--memory-budget %.2f: peak %zu B, %.4fx the unbudgeted %zu B; budget %zu B of a measured base %zu B\n",
                  fraction, run.peak, static_cast<double>(run.peak) / static_cast<double>(unbudgeted), unbudgeted,
                  run.fit->budget_bytes, run.fit->baseline_peak);
      EXPECT_LE(run.fit->baseline_peak, unbudgeted);
      EXPECT_GE(static_cast<double>(run.fit->baseline_peak), 0.99 * static_cast<double>(unbudgeted));
      EXPECT_LE(run.peak, run.fit->budget_bytes);
      EXPECT_LE(static_cast<double>(run.peak), fraction * static_cast<double>(unbudgeted));
    } catch (const ValueError& e) {  // nothing fits this fraction: the message says so
      EXPECT_NE(std::string(e.what()).find("--memory-budget"), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(fitting, min_fitting);
}

TEST(TrainerMemoryBudget, ResNetRunsPeakWithinTheFractionOfTheUnbudgetedPeak) {
  TrainOptions o = testing::small_synthetic_options(48);
  o.synthetic_height = o.synthetic_width = 32;
  o.batch_size = 16;
  o.epochs = 1;
  o.limit_test = 16;
  expect_budgets_bound_the_peak(o, {0.5, 0.6, 0.7, 0.8, 0.9, 0.95}, 4);
}

TEST(TrainerMemoryBudget, GptRunsPeakWithinTheFractionOfTheUnbudgetedPeak) {
  testing::ScratchDir dir;
  std::ofstream(dir.path() / "text.txt") << std::string(4000, 'a') + "the cat sat on the mat. ";
  TrainOptions o;
  o.model = "gpt-nano";
  o.data = "text";
  o.data_dir = dir.path() / "text.txt";
  o.device = "cpu";
  o.optimizer = "adamw";
  o.batch_size = 8;
  o.seq_len = 64;
  o.steps = 3;
  o.eval_interval = 3;
  o.eval_batches = 1;
  o.seed = 5;
  expect_budgets_bound_the_peak(o, {0.6, 0.7, 0.8, 0.9}, 2);
}

}  // namespace
}  // namespace sublet::train
