// `sublet train --model gpt-nano --cuda-graph` as a library: the Trainer's GPT step (forward under
// bfloat16 autocast, cross-entropy, backward, clipping at 1.0, AdamW with nanoGPT's warm-up +
// cosine learning rate evaluated between steps) captured after three eager steps and replayed
// gives the eager run's losses over 12 steps (1e-3 relative: the same kernels on the same data;
// float atomics in the embedding gradient may sum in another order), the same learning rates and
// the same validation loss at each evaluation, with the static memory plan the CLI uses by default.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/gpu_skip.h"
#include "tests/train/train_test_support.h"
#include "train/trainer.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;

struct TrainingRun {
  std::vector<float> losses;
  std::vector<double> lrs;
  std::vector<double> val_losses;
};

TrainingRun train_run(const fs::path& text, bool cuda_graph) {
  train::TrainOptions o = train::testing::gpt_nano_text_options(text, 12);
  o.device = "cuda";
  o.precision = "bf16";
  o.schedule = "cosine";
  o.warmup_steps = 4;
  o.grad_clip = 1.0;
  o.batch_size = 8;
  o.seq_len = 32;
  o.eval_interval = 6;
  o.cuda_graph = cuda_graph;
  train::Trainer trainer(o);
  TrainingRun run;
  while (static_cast<int>(run.losses.size()) < 12) {
    run.lrs.push_back(trainer.optimizer().lr());
    if (std::optional<float> loss = trainer.train_step()) {
      run.losses.push_back(*loss);
    } else {
      run.lrs.pop_back();
      run.val_losses.push_back(trainer.finish_epoch().val_loss);
    }
  }
  run.val_losses.push_back(trainer.finish_epoch().val_loss);
  return run;
}

TEST(TrainerGptCudaGraph, ReplayedStepsTrainAsTheEagerOnes) {
  SUBLET_SKIP_WITHOUT_GPU("the Trainer's captured GPT step against its eager step");
  const fs::path text = fs::temp_directory_path() / ("sublet_gpt_graph_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << "the cat sat on the mat. the dog ran to the log. ";
  }
  const TrainingRun eager = train_run(text, false);
  const TrainingRun graphed = train_run(text, true);
  fs::remove(text);
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  for (std::size_t i = 0; i < eager.losses.size(); ++i) {
    ASSERT_TRUE(std::isfinite(eager.losses[i])) << "step " << i;
    EXPECT_NEAR(graphed.losses[i], eager.losses[i], 1e-3 * std::abs(eager.losses[i])) << "step " << i;
    EXPECT_EQ(graphed.lrs[i], eager.lrs[i]) << "step " << i;
  }
  EXPECT_NE(eager.lrs[2], eager.lrs[9]);  // the schedule moves the rate
  EXPECT_LT(eager.losses.back(), eager.losses.front());
  ASSERT_EQ(eager.val_losses.size(), 2u);
  ASSERT_EQ(graphed.val_losses.size(), 2u);
  for (std::size_t i = 0; i < eager.val_losses.size(); ++i)
    EXPECT_NEAR(graphed.val_losses[i], eager.val_losses[i], 1e-3 * eager.val_losses[i]) << "evaluation " << i;
}

}  // namespace
}  // namespace sublet
