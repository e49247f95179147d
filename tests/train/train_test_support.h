#pragma once
// Helpers of the train tests: a scratch directory, small synthetic training options, and a
// step loop that crosses epoch boundaries.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "../data/test_support.h"
#include "train/trainer.h"

namespace sublet::train::testing {

// One temporary folder per test, removed afterwards (shared with the data tests).
using ScratchDir = sublet::testing::ScratchDir;

// ResNet-20 on a small synthetic task: 3x16x16 images, `train_images` of them, batch 32; fast
// enough to run several trainers per test on two cores.
inline TrainOptions small_synthetic_options(std::int64_t train_images = 256) {
  TrainOptions o;
  o.model = "resnet20";
  o.data = "synthetic";
  o.device = "cpu";
  o.synthetic_channels = 3;
  o.synthetic_height = 16;
  o.synthetic_width = 16;
  o.limit_train = train_images;
  o.limit_test = 64;
  o.batch_size = 32;
  o.epochs = 2;
  o.seed = 11;
  o.lr = 0.05;
  return o;
}

// gpt-nano (context 64) on a text file with nanoGPT's AdamW set-up: the GPT trainer tests' run,
// batch 16 of full-context windows; evaluation every 20 steps on 2 batches.
inline TrainOptions gpt_nano_text_options(const std::filesystem::path& text, std::int64_t steps) {
  TrainOptions o;
  o.model = "gpt-nano";
  o.data = "text";
  o.data_dir = text;
  o.device = "cpu";
  o.optimizer = "adamw";
  o.weight_decay = 0.1;
  o.label_smoothing = 0.0;
  o.lr = 3e-3;
  o.batch_size = 16;
  o.steps = steps;
  o.eval_interval = 20;
  o.eval_batches = 2;
  o.warmup_steps = 5;
  o.seed = 3;
  return o;
}

// `steps` optimizer steps, finishing epochs (evaluation included) whenever one runs out.
inline std::vector<float> run_steps(Trainer& trainer, int steps) {
  std::vector<float> losses;
  while (static_cast<int>(losses.size()) < steps) {
    if (std::optional<float> loss = trainer.train_step()) {
      losses.push_back(*loss);
    } else {
      trainer.finish_epoch();
    }
  }
  return losses;
}

}  // namespace sublet::train::testing
