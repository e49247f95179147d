// The Trainer's GPT path with a shape schedule (TrainOptions::shape_schedule): gpt-nano learns a
// text with a new window length each step, every step trains on its schedule entry's shape, the
// learning rate follows the tokens trained, the metrics record the schedule, the bad
// combinations are refused with their reason, and a resume continues the same schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <numbers>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "runtime/data/shape_schedule.h"
#include "train/trainer.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

using testing::ScratchDir;

// The message of the ValueError `call` throws ("" and a failure when it throws none).
template <typename Call>
std::string value_error_of(Call&& call) {
  try {
    call();
  } catch (const ValueError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no ValueError";
  return "";
}

// Every step's shape as the Trainer reported it: the windows and length its input held.
class ShapeRecorder : public TrainingObserver {
 public:
  void step_finished(const StepProgress& p) override {
    shapes.push_back({.batch = p.step_batch, .seq_len = p.step_seq_len});
    tokens_per_s.push_back(p.tokens_per_s);
  }
  std::vector<data::ShapeStep> shapes;
  std::vector<double> tokens_per_s;
};

class TrainerShapeSchedule : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream out(dir_ / "text.txt");
    // A small repetitive text: learnable in a few dozen steps.
    for (int i = 0; i < 200; ++i) out << "the cat sat on the mat. the dog ran to the log. ";
  }

  static std::shared_ptr<const data::ShapeSchedule> schedule(std::uint64_t seed, std::int64_t steps,
                                                             std::int64_t max_len = 64) {
    return std::make_shared<const data::ShapeSchedule>(data::token_schedule(
        {.seed = seed, .steps = steps, .min_len = 8, .max_len = max_len, .tokens_per_batch = 256}));
  }

  TrainOptions options(std::int64_t steps) const {
    TrainOptions o = testing::gpt_nano_text_options(dir_ / "text.txt", steps);
    o.shape_schedule = schedule(3, steps);
    return o;
  }

  ScratchDir dir_;
};

TEST_F(TrainerShapeSchedule, TrainsWithARangeAndTheLossFalls) {
  TrainOptions o = options(60);
  o.metrics_json = dir_ / "metrics.json";
  Trainer trainer(o);
  EXPECT_EQ(trainer.seq_len(), 64);     // the evaluation's fixed windows: the context
  EXPECT_EQ(trainer.batch_size(), 4);   // 256 tokens / 64
  EXPECT_NE(trainer.describe().find("shape schedule seq 8..64"), std::string::npos) << trainer.describe();
  const std::optional<float> first = trainer.train_step();
  ASSERT_TRUE(first.has_value());
  const std::vector<EpochMetrics>& history = trainer.fit();
  ASSERT_EQ(history.size(), 3u);  // 60 steps, an evaluation every 20
  EXPECT_TRUE(history.back().train_loss <= 0.7 * *first) << "first " << *first << ", last " << history.back().train_loss;
  EXPECT_TRUE(history.back().val_loss <= 0.7 * *first) << history.back().val_loss;
  EXPECT_TRUE(history.back().tokens_per_s > 0.0);
  EXPECT_TRUE(history.back().peak_allocated_bytes > 0);

  // Each interval's tokens are its steps' batch x length, as the schedule drew them.
  std::int64_t expected = 0, recorded = 0;
  for (const data::ShapeStep& s : o.shape_schedule->steps) expected += s.batch * s.seq_len;
  for (const EpochMetrics& m : history) recorded += m.tokens;
  EXPECT_EQ(recorded, expected);

  std::ifstream in(o.metrics_json);
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& s = doc.at("shape_schedule");
  EXPECT_EQ(s.at("seq_len_min"), 8);
  EXPECT_EQ(s.at("seq_len_max"), 64);
  EXPECT_EQ(s.at("tokens_per_batch"), 256);
  EXPECT_EQ(s.at("seed"), 3);
  EXPECT_EQ(s.at("steps"), 60);
  EXPECT_EQ(s.at("eval_seq_len"), 64);
  EXPECT_EQ(doc.at("epochs")[2].at("tokens"), history[2].tokens);
  EXPECT_TRUE(doc.at("epochs")[2].at("peak_reserved_bytes").get<std::int64_t>() > 0);
}

TEST_F(TrainerShapeSchedule, EveryStepTrainsOnItsScheduleEntry) {
  TrainOptions o = options(16);
  o.eval_interval = 8;
  Trainer trainer(o);
  ShapeRecorder recorder;
  trainer.set_observer(&recorder);
  trainer.fit();
  const std::vector<data::ShapeStep>& planned = o.shape_schedule->steps;
  ASSERT_EQ(recorder.shapes.size(), planned.size());
  std::set<std::int64_t> lengths;
  for (std::size_t k = 0; k < planned.size(); ++k) {
    EXPECT_EQ(recorder.shapes[k], planned[k]) << "step " << k;
    EXPECT_EQ(trainer.step_shape(static_cast<std::int64_t>(k)), planned[k]) << "step " << k;
    lengths.insert(recorder.shapes[k].seq_len);
  }
  EXPECT_TRUE(lengths.size() >= 4) << "the schedule should vary the length";
  for (double rate : recorder.tokens_per_s) EXPECT_TRUE(rate > 0.0);
}

// nanoGPT's warm-up and cosine, evaluated at the tokens trained before each step.
TEST_F(TrainerShapeSchedule, TheLearningRateFollowsTheTokensTrained) {
  TrainOptions o = options(16);
  o.eval_interval = 8;
  Trainer trainer(o);
  const std::vector<data::ShapeStep>& steps = o.shape_schedule->steps;
  std::vector<double> before(steps.size() + 1, 0.0);
  for (std::size_t k = 0; k < steps.size(); ++k)
    before[k + 1] = before[k] + static_cast<double>(steps[k].batch * steps[k].seq_len);
  const double warmup = 5, warm_tokens = before[5], total = before[steps.size()], lr = o.lr;
  const auto expected = [&](std::size_t k) {
    if (before[k] < warm_tokens) return lr * (1.0 + warmup * before[k] / warm_tokens) / (warmup + 1.0);
    const double progress = (before[k] - warm_tokens) / (total - warm_tokens);
    return lr / 10.0 + (lr - lr / 10.0) * (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
  };
  for (std::size_t k = 0; k < steps.size(); ++k) {
    EXPECT_NEAR(trainer.optimizer().lr(), expected(k), 1e-12 * lr) << "before step " << k;
    std::optional<float> loss = trainer.train_step();
    if (!loss) {
      trainer.finish_epoch();
      loss = trainer.train_step();
    }
    ASSERT_TRUE(loss.has_value()) << "step " << k;
  }
}

TEST_F(TrainerShapeSchedule, RefusesWhatCannotTakeASchedule) {
  TrainOptions o = options(10);
  o.model = "resnet20";
  o.data = "synthetic";
  EXPECT_NE(value_error_of([&] { validate(o); }).find("--model resnet20 is an image model"), std::string::npos);

  o = options(10);
  o.seq_len = 32;
  EXPECT_NE(value_error_of([&] { validate(o); }).find("--seq-len: the shape schedule sets every step's window length"),
            std::string::npos);

  o = options(10);
  o.shape_schedule = schedule(3, 10, /*max_len=*/72);
  EXPECT_NE(value_error_of([&] { validate(o); }).find("a length of 72 passes gpt-nano's context of 64"),
            std::string::npos);

  o = options(10);
  o.shape_schedule = std::make_shared<const data::ShapeSchedule>(
      data::image_schedule({.seed = 1, .steps = 10, .batch_size = 4, .channels = 3, .resolutions = {16}}));
  EXPECT_NE(value_error_of([&] { validate(o); })
                .find("gpt-nano takes token windows (--seq-len-range), the schedule holds images"),
            std::string::npos);

  o = options(10);
  o.cuda_graph = true;
  EXPECT_NE(value_error_of([&] { validate(o); }).find("--cuda-graph replays one captured step of fixed shapes"),
            std::string::npos);

  o = options(10);
  o.steps = 11;  // the schedule holds 10 entries
  EXPECT_NE(value_error_of([&] { validate(o); }).find("10 steps, but the run needs 11 (--steps)"), std::string::npos);
}

// Resumed mid-interval at step 13 the run trains the same shapes and computes the same losses
// (and the same interval mean) as one that never stopped; another schedule is refused.
TEST_F(TrainerShapeSchedule, ResumeContinuesTheSameSchedule) {
  TrainOptions o = options(20);
  o.eval_interval = 10;
  const std::filesystem::path checkpoint = dir_ / "ck.safetensors";
  std::vector<float> straight;
  std::vector<EpochMetrics> straight_history;
  {
    Trainer trainer(o);
    straight = testing::run_steps(trainer, 13);
    trainer.save_checkpoint(checkpoint);
    while (trainer.epoch() < 2) {
      while (std::optional<float> loss = trainer.train_step()) straight.push_back(*loss);
      trainer.finish_epoch();
    }
    straight_history = trainer.history();
  }
  ASSERT_EQ(straight.size(), 20u);

  Trainer resumed(o);
  ShapeRecorder recorder;
  resumed.set_observer(&recorder);
  resumed.resume_from(checkpoint);
  EXPECT_EQ(resumed.global_step(), 13);
  std::vector<float> after;
  while (std::optional<float> loss = resumed.train_step()) after.push_back(*loss);
  const EpochMetrics second = resumed.finish_epoch();
  ASSERT_EQ(after.size(), 7u);
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i], straight[13 + i]) << "step " << 13 + i;
    EXPECT_EQ(recorder.shapes[i], o.shape_schedule->steps[13 + i]) << "step " << 13 + i;
  }
  EXPECT_EQ(second.train_loss, straight_history[1].train_loss);
  EXPECT_EQ(second.tokens, straight_history[1].tokens);

  TrainOptions other = o;
  other.shape_schedule = schedule(4, 20);
  EXPECT_NE(value_error_of([&] { Trainer(other).resume_from(checkpoint); }).find("gives its 13 steps other shapes"),
            std::string::npos);
  TrainOptions longer = o;  // more steps drawn from the same seed: the first 13 are the same
  longer.steps = 30;
  longer.shape_schedule = schedule(3, 30);
  Trainer extended(longer);
  EXPECT_NO_THROW(extended.resume_from(checkpoint));
  TrainOptions fixed = o;
  fixed.shape_schedule = nullptr;
  fixed.seq_len = 32;
  EXPECT_NE(value_error_of([&] { Trainer(fixed).resume_from(checkpoint); }).find("was trained with a shape schedule"),
            std::string::npos);
  Trainer fixed_run(fixed);
  testing::run_steps(fixed_run, 2);
  fixed_run.save_checkpoint(dir_ / "fixed.safetensors");
  EXPECT_NE(value_error_of([&] { Trainer(o).resume_from(dir_ / "fixed.safetensors"); }).find("fixed windows"),
            std::string::npos);
}

}  // namespace
}  // namespace sublet::train
