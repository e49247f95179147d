// The CPU accuracy guard (as tinygrad's CI keeps one): ResNet-20 trained by the Trainer on 2,000
// real MNIST digits must reach at least 90% test accuracy on 1,000 held-out digits. It needs
// the files of scripts/fetch_mnist.sh in data/mnist and FAILS without them (CI fetches them
// before ctest): a skipped accuracy check would let a numeric regression through unnoticed.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "train/trainer.h"

namespace sublet::train {
namespace {

TEST(TrainerMnist, ResNet20Reaches90PercentOn2000Digits) {
  const std::filesystem::path mnist = std::filesystem::path(SUBLET_SOURCE_DIR) / "data" / "mnist";
  if (!std::filesystem::exists(mnist / "train-images-idx3-ubyte") &&
      !std::filesystem::exists(mnist / "train-images-idx3-ubyte.gz")) {
    FAIL() << "MNIST is missing from " << mnist << ": run scripts/fetch_mnist.sh (from the repository root) first";
  }
  TrainOptions options;  // the CLI's defaults (resnet20, SGD momentum 0.9, cosine) except:
  options.data_dir = mnist;
  options.device = "cpu";
  options.limit_train = 2000;
  options.limit_test = 1000;
  options.epochs = 2;
  options.batch_size = 16;  // 125 steps an epoch: with batch 32, two epochs fall short of the goal
  options.lr = 0.05;
  options.seed = 0;

  Trainer trainer(options);
  const std::vector<EpochMetrics> history = trainer.fit();
  ASSERT_EQ(history.size(), 2u);
  for (const EpochMetrics& m : history) {
    std::cout << "[mnist resnet20] epoch " << m.epoch << ": train loss " << m.train_loss << ", train acc "
              << 100 * m.train_acc << "%, test acc " << 100 * m.test_acc << "%, " << m.img_per_s << " img/s, "
              << m.seconds << " s, peak allocated " << m.peak_allocated_bytes << " B, peak reserved "
              << m.peak_reserved_bytes << " B\n";
    RecordProperty("epoch" + std::to_string(m.epoch) + "_test_acc", std::to_string(m.test_acc));
    RecordProperty("epoch" + std::to_string(m.epoch) + "_seconds", std::to_string(m.seconds));
  }
  EXPECT_GE(history.back().test_acc, 0.90);
  // Learning, not luck: the second epoch's training loss is below the first's.
  EXPECT_LT(history[1].train_loss, history[0].train_loss);
  EXPECT_GT(history.back().peak_allocated_bytes, 0u);
  EXPECT_GE(history.back().peak_reserved_bytes, history.back().peak_allocated_bytes);
}

}  // namespace
}  // namespace sublet::train
