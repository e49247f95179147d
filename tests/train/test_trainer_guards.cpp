// What stops a training run early and what it keeps: a non-finite loss stops it before the
// optimizer step without touching the last checkpoint (unless --allow-nonfinite), and a final
// batch of one image, which batch norm cannot train on, is dropped before the epoch instead of
// failing after it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/autograd/grad_mode.h"
#include "train/training_observer.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

using testing::ScratchDir;

std::vector<std::uint8_t> file_bytes(const std::filesystem::path& path) { return sublet::testing::read_raw(path); }

// Makes the next forward produce NaN: one value of the classifier's last parameter set to NaN
// (a NaN early in the network can vanish: ReLU maps it to 0).
void poison_one_weight(Trainer& trainer) {
  NoGradGuard no_grad;
  Tensor weight = trainer.model().parameters().back();
  weight.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
}

TEST(TrainerGuards, NonFiniteLossStopsAndKeepsTheLastCheckpoint) {
  ScratchDir dir;
  TrainOptions options = testing::small_synthetic_options(64);
  options.epochs = 1;
  options.checkpoint = dir / "ck.safetensors";
  Trainer first(options);
  first.fit();
  const std::vector<std::uint8_t> saved = file_bytes(options.checkpoint);
  ASSERT_FALSE(saved.empty());

  options.epochs = 2;
  options.resume = options.checkpoint;
  Trainer second(options);
  second.resume_from(options.checkpoint);
  poison_one_weight(second);
  try {
    second.fit();
    ADD_FAILURE() << "a NaN loss did not stop training";
  } catch (const NonFiniteError& e) {
    const std::string message = e.what();
    for (const char* part : {"the training loss is nan at epoch 2, step 1", "learning rate", "--allow-nonfinite",
                             "the last checkpoint", "was kept"})
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
  EXPECT_EQ(file_bytes(options.checkpoint), saved) << "the checkpoint was overwritten";
  EXPECT_EQ(second.global_step(), first.global_step()) << "a step was counted";
}

TEST(TrainerGuards, AllowNonfiniteGoesOn) {
  TrainOptions options = testing::small_synthetic_options(64);
  options.allow_nonfinite = true;
  Trainer trainer(options);
  poison_one_weight(trainer);
  const std::optional<float> loss = trainer.train_step();
  ASSERT_TRUE(loss.has_value());
  EXPECT_FALSE(std::isfinite(*loss));
}

// 1x1 images: every batch norm of ResNet-20 sees one value per channel and image, so a batch of
// one image cannot train. 9 images at batch size 4: the third batch would hold one.
TEST(TrainerGuards, FinalBatchOfOneImageIsDroppedBeforeTheEpoch) {
  TrainOptions options = testing::small_synthetic_options(9);
  options.synthetic_height = 1;
  options.synthetic_width = 1;
  options.batch_size = 4;
  options.limit_test = 4;
  options.epochs = 1;
  Trainer trainer(options);
  int steps = 0;
  while (trainer.train_step()) ++steps;
  EXPECT_EQ(steps, 2);
  const EpochMetrics m = trainer.finish_epoch();
  EXPECT_TRUE(std::isfinite(m.train_loss));

  // An even split keeps every image.
  options.limit_train = 8;
  Trainer even(options);
  steps = 0;
  while (even.train_step()) ++steps;
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(even.samples_in_epoch(), 8);
}

// Collects the trainer's notes.
struct NoteLog : TrainingObserver {
  std::vector<std::string> notes;
  void note(const std::string& message) override { notes.push_back(message); }
  bool has(const std::string& part) const {
    for (const auto& n : notes)
      if (n.find(part) != std::string::npos) return true;
    return false;
  }
};

TEST(TrainerGuards, DescriptionSaysTheBatchSizeUsed) {
  TrainOptions options = testing::small_synthetic_options(64);
  options.batch_size = 100000;
  const std::string text = Trainer(options).describe();
  EXPECT_NE(text.find("batch size 64 (--batch-size 100000 is more than the 64 training images)"), std::string::npos) << text;
}

TEST(TrainerGuards, ResumingWithOtherEpochsSaysTheScheduleChanges) {
  ScratchDir dir;
  TrainOptions options = testing::small_synthetic_options(64);
  options.epochs = 1;
  options.checkpoint = dir / "ck.safetensors";
  Trainer(options).fit();
  options.epochs = 3;
  Trainer resumed(options);
  NoteLog log;
  resumed.set_observer(&log);
  resumed.resume_from(options.checkpoint);
  EXPECT_TRUE(log.has("resuming a run planned for 1 epochs with --epochs 3: the cosine schedule now spans 3 epochs"))
      << (log.notes.empty() ? "no notes" : log.notes.front());
}

}  // namespace
}  // namespace sublet::train
