// `sublet train` as a data-parallel worker of a world of one (torchrun's variables set, as the
// launcher sets them) on one GPU: the whole path (store, NCCL communicator, the rank's shard of
// each epoch, buckets on the communication stream) trains to the same losses as the plain
// Trainer, bit for bit, across an epoch boundary, and writes the same checkpoint position.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "tests/gpu_skip.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

// torchrun's variables for rank 0 of 1, for the test's scope.
class WorldOfOne {
 public:
  WorldOfOne() {
    for (const auto& [k, v] : kVariables) setenv(k, v, 1);
  }
  ~WorldOfOne() {
    for (const auto& [k, v] : kVariables) unsetenv(k);
  }

 private:
  static constexpr std::pair<const char*, const char*> kVariables[] = {
      {"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_WORLD_SIZE", "1"},
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29517"}};
};

TEST(TrainerDataParallel, WorldOfOneTrainsBitForBitAsThePlainTrainer) {
  SUBLET_SKIP_WITHOUT_GPU("data parallel at world size 1 (NCCL on one GPU)");
  TrainOptions options = testing::small_synthetic_options(160);  // 5 steps an epoch: 10 steps are two epochs
  options.device = "cuda";
  Trainer plain(options);
  const std::vector<float> plain_losses = testing::run_steps(plain, 10);
  const double plain_accuracy = plain.finish_epoch().test_acc;

  WorldOfOne world;
  options.data_parallel = true;
  options.bucket_cap_mb = 1;  // ResNet-20: more than one bucket
  Trainer parallel(options);
  EXPECT_EQ(parallel.world_size(), 1);
  EXPECT_NE(parallel.describe().find("data parallel (nccl): rank 0 of 1 on cuda:0"), std::string::npos) << parallel.describe();
  const std::vector<float> parallel_losses = testing::run_steps(parallel, 10);
  ASSERT_EQ(plain_losses.size(), parallel_losses.size());
  EXPECT_EQ(std::memcmp(plain_losses.data(), parallel_losses.data(), plain_losses.size() * sizeof(float)), 0);
  for (std::size_t i = 0; i < plain_losses.size(); ++i) EXPECT_EQ(plain_losses[i], parallel_losses[i]) << "step " << i;
  EXPECT_EQ(parallel.finish_epoch().test_acc, plain_accuracy);
  EXPECT_EQ(memory_stats(Device::cuda(0)).at("num_sync_all_streams"), 0);
}

}  // namespace
}  // namespace sublet::train
