// Exact resume: k steps, checkpoint, a new Trainer from the checkpoint, the remaining steps —
// the same loss sequence, bit for bit, as one uninterrupted run on the CPU, and the same final
// parameters and optimizer state. Checked mid-epoch and across an epoch boundary, for SGD with
// momentum and for AdamW (whose moments and step counts must come back too).
#include <gtest/gtest.h>

#include <cstring>

#include "train_test_support.h"

namespace sublet::train {
namespace {

using testing::run_steps;
using testing::ScratchDir;

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.sizes() == y.sizes() && x.dtype() == y.dtype() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

void expect_same_state(const std::vector<std::pair<std::string, Tensor>>& a,
                       const std::vector<std::pair<std::string, Tensor>>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first) << what;
    EXPECT_TRUE(same_bits(a[i].second, b[i].second)) << what << " entry " << a[i].first << " differs";
  }
}

struct ResumeCase {
  const char* optimizer;
  int split_step;  // steps before the checkpoint; 8 steps make an epoch here
  int total_steps;
};

class TrainerResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(TrainerResume, ResumedRunRepeatsTheUninterruptedLossesBitForBit) {
  const ResumeCase c = GetParam();
  TrainOptions options = testing::small_synthetic_options();
  options.optimizer = c.optimizer;
  options.lr = std::string(c.optimizer) == "sgd" ? 0.05 : 2e-3;

  Trainer uninterrupted(options);
  const std::vector<float> expected = run_steps(uninterrupted, c.total_steps);

  ScratchDir dir;
  const auto checkpoint = dir / "resume.safetensors";
  std::vector<float> resumed_losses;
  {
    Trainer first(options);
    resumed_losses = run_steps(first, c.split_step);
    first.save_checkpoint(checkpoint);
  }
  Trainer second(options);
  second.resume_from(checkpoint);
  EXPECT_EQ(second.global_step(), c.split_step);
  const std::vector<float> rest = run_steps(second, c.total_steps - c.split_step);
  resumed_losses.insert(resumed_losses.end(), rest.begin(), rest.end());

  ASSERT_EQ(resumed_losses.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(resumed_losses[i], expected[i]) << "step " << i + 1 << " of " << expected.size();
  }
  // A loss sequence that never moved would pass trivially: training must have progressed.
  EXPECT_NE(expected.front(), expected.back());
  expect_same_state(uninterrupted.model().state_dict(), second.model().state_dict(), "model");
  expect_same_state(uninterrupted.optimizer().state_dict(), second.optimizer().state_dict(), "optimizer");
  EXPECT_EQ(uninterrupted.epoch(), second.epoch());
  EXPECT_EQ(uninterrupted.samples_in_epoch(), second.samples_in_epoch());
  ASSERT_EQ(uninterrupted.history().size(), second.history().size());
  for (std::size_t e = 0; e < uninterrupted.history().size(); ++e) {
    EXPECT_EQ(uninterrupted.history()[e].train_loss, second.history()[e].train_loss);
    EXPECT_EQ(uninterrupted.history()[e].test_acc, second.history()[e].test_acc);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, TrainerResume,
                         ::testing::Values(ResumeCase{"sgd", 5, 12},     // mid-epoch, then across the boundary
                                           ResumeCase{"sgd", 8, 12},     // epoch used up, not yet finished
                                           ResumeCase{"adamw", 3, 10}),  // optimizer moments restored
                         [](const auto& info) {
                           return std::string(info.param.optimizer) + "_split_" + std::to_string(info.param.split_step);
                         });

TEST(TrainerResume, FitContinuesFromAnEpochCheckpointToTheSameHistory) {
  TrainOptions options = testing::small_synthetic_options(128);
  options.epochs = 2;
  Trainer uninterrupted(options);
  const std::vector<EpochMetrics> expected = uninterrupted.fit();

  // The first run stops after one epoch of the same two-epoch plan (the cosine schedule spans
  // the planned epochs, so a run planned for one epoch would follow another learning-rate curve).
  ScratchDir dir;
  const auto checkpoint = dir / "epoch.safetensors";
  {
    Trainer first(options);
    first.train_epoch();
    first.save_checkpoint(checkpoint);
  }
  Trainer second(options);
  second.resume_from(checkpoint);
  const std::vector<EpochMetrics> resumed = second.fit();
  ASSERT_EQ(resumed.size(), 2u);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(resumed[e].epoch, expected[e].epoch);
    EXPECT_EQ(resumed[e].train_loss, expected[e].train_loss) << "epoch " << e + 1;
    EXPECT_EQ(resumed[e].train_acc, expected[e].train_acc) << "epoch " << e + 1;
    EXPECT_EQ(resumed[e].test_acc, expected[e].test_acc) << "epoch " << e + 1;
  }
}

}  // namespace
}  // namespace sublet::train
