// `sublet train --model gpt-nano --data text` as a library: the Trainer's GPT path learns a text
// (loss below 0.7x its first value), evaluates, writes metrics JSON, a checkpoint and the weights
// file, resumes exactly, and sampling from the trained model continues a prompt with the text's words.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "models/gpt.h"
#include "models/gpt_export.h"
#include "models/gpt_sampling.h"
#include "memory/registry.h"
#include "runtime/nn/functional.h"
#include "tests/train/train_test_support.h"
#include "train/gpt_memory_budget.h"
#include "train/trainer.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;

class GptTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sublet_gpt_training_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream out(dir_ / "text.txt");
    // A small repetitive text: learnable in a few dozen steps.
    for (int i = 0; i < 200; ++i) out << "the cat sat on the mat. the dog ran to the log. ";
  }
  void TearDown() override { fs::remove_all(dir_); }

  train::TrainOptions options(std::int64_t steps) const {
    train::TrainOptions o = train::testing::gpt_nano_text_options(dir_ / "text.txt", steps);
    o.batch_size = 8;
    o.seq_len = 32;
    o.eval_interval = 40;
    return o;
  }
  fs::path dir_;
};

TEST_F(GptTraining, LossFallsBelowSevenTenthsOfItsStart) {
  train::TrainOptions o = options(80);
  o.checkpoint = dir_ / "gpt.safetensors";
  o.metrics_json = dir_ / "metrics.json";
  train::Trainer trainer(o);
  EXPECT_EQ(trainer.seq_len(), 32);
  EXPECT_NE(trainer.describe().find("gpt-nano"), std::string::npos) << trainer.describe();
  std::optional<float> first = trainer.train_step();
  ASSERT_TRUE(first.has_value());
  const auto& history = trainer.fit();
  ASSERT_EQ(history.size(), 2u);  // 80 steps, an evaluation every 40
  EXPECT_EQ(history.back().step, 80);
  EXPECT_TRUE(history.back().language_model);
  const double last_train = history.back().train_loss;
  EXPECT_TRUE(last_train <= 0.7 * *first) << "first " << *first << ", last interval " << last_train;
  EXPECT_TRUE(history.back().val_loss <= 0.7 * *first) << history.back().val_loss;
  EXPECT_NEAR(history.back().val_perplexity, std::exp(history.back().val_loss), 1e-9);
  EXPECT_TRUE(history.back().tokens_per_s > 0.0);

  std::ifstream metrics(o.metrics_json);
  const nlohmann::json doc = nlohmann::json::parse(metrics);
  EXPECT_EQ(doc.at("model"), "gpt-nano");
  EXPECT_EQ(doc.at("epochs").size(), 2u);
  EXPECT_EQ(doc.at("epochs")[1].at("step"), 80);
  EXPECT_DOUBLE_EQ(doc.at("final_val_loss").get<double>(), history.back().val_loss);

  // The weights file beside the checkpoint holds the trained model.
  const fs::path weights = train::language_model_weights_path(o.checkpoint);
  EXPECT_EQ(weights.filename(), "gpt.weights.safetensors");
  auto loaded = models::load_gpt_weights(weights);
  // Greedy continuation of a prompt from the text: the words it learnt.
  std::vector<std::int64_t> prompt;
  for (unsigned char c : std::string("the cat sat on")) prompt.push_back(c);
  const std::vector<std::int64_t> next =
      models::generate(*loaded, prompt, models::SamplingOptions().max_new_tokens(8).temperature(0.0));
  std::string text;
  for (std::int64_t id : next) text += static_cast<char>(id);
  EXPECT_EQ(text.substr(0, 4), " the") << "'" << text << "'";
}

// A run resumed from a checkpoint at step 40 computes the same losses as one that never stopped.
TEST_F(GptTraining, ResumeGivesTheSameLosses) {
  train::TrainOptions o = options(60);
  o.eval_interval = 20;
  o.checkpoint = dir_ / "a.safetensors";
  std::vector<float> straight;
  {
    train::Trainer trainer(o);
    while (trainer.epoch() < 2) {
      while (std::optional<float> loss = trainer.train_step()) straight.push_back(*loss);
      trainer.finish_epoch();
    }
    trainer.save_checkpoint(o.checkpoint);
    while (std::optional<float> loss = trainer.train_step()) straight.push_back(*loss);
  }
  train::Trainer resumed(o);
  resumed.resume_from(o.checkpoint);
  EXPECT_EQ(resumed.global_step(), 40);
  std::vector<float> after;
  while (std::optional<float> loss = resumed.train_step()) after.push_back(*loss);
  ASSERT_EQ(after.size(), 20u);
  for (std::size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i], straight[40 + i]) << "step " << 40 + i;
}

// --memory-budget on a GPT: blocks recomputed until the measured step fits; the loss is unchanged.
TEST_F(GptTraining, MemoryBudgetRecomputesBlocksUntilTheStepFits) {
  models::GPTConfig config = models::gpt_config("gpt-nano", 256);
  models::GPT model(config);
  const data::TokenDataset tokens = data::load_text_dataset(dir_ / "text.txt");
  const data::TokenBatch batch = data::RandomWindowSampler(tokens.train, data::TokenBatchOptions(8, 64)).batch(0);
  const amp::StepRecipe recipe;
  const train::GptRecomputeReport report =
      train::fit_gpt_memory_budget(model, memory::parse_memory_budget("0.8"), batch.inputs, batch.targets, recipe, 0);
  EXPECT_TRUE(report.recomputed_blocks >= 1 && report.recomputed_blocks <= 3) << report.summary();
  EXPECT_TRUE(report.measured_peak <= report.budget_bytes) << report.summary();
  EXPECT_TRUE(report.measured_peak < report.baseline_peak) << report.summary();
  EXPECT_EQ(model.transformer->h->recompute_runs().size(), static_cast<std::size_t>(report.recomputed_blocks));
  // A budget nothing fits is refused, and the model is left recomputing nothing.
  EXPECT_THROW(train::fit_gpt_memory_budget(model, memory::parse_memory_budget("0.05"), batch.inputs, batch.targets,
                                            recipe, 0),
               ValueError);
  EXPECT_TRUE(model.transformer->h->recompute_runs().empty());
}

TEST_F(GptTraining, BadOptionsAreValueErrors) {
  train::TrainOptions o = options(10);
  o.seq_len = 65;  // gpt-nano's context is 64
  EXPECT_THROW(train::Trainer{o}, ValueError);
  o = options(10);
  o.data = "mnist";
  EXPECT_THROW(train::validate(o), ValueError);
  o = options(10);
  o.model = "resnet20";
  EXPECT_THROW(train::validate(o), ValueError);  // text data for an image model
  o = options(10);
  o.eval_interval = 0;
  EXPECT_THROW(train::validate(o), ValueError);
}

}  // namespace
}  // namespace sublet
