// Training checkpoints: what is saved comes back (identity, position, tensors), a checkpoint of
// another model or optimizer is refused with a message naming both, and damaged files or
// foreign safetensors files are IoErrors that name the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <fstream>

#include "core/errors.h"
#include "runtime/io/safetensors.h"
#include "train/checkpoint.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

using testing::ScratchDir;

std::string error_text(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(Checkpoint, RoundTripKeepsIdentityPositionAndTensors) {
  TrainOptions options = testing::small_synthetic_options(64);
  Trainer trainer(options);
  testing::run_steps(trainer, 1);
  ScratchDir dir;
  const auto path = dir / "ck.safetensors";
  trainer.save_checkpoint(path);

  const Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.identity, trainer.identity());
  EXPECT_EQ(loaded.identity.model, "resnet20");
  EXPECT_EQ(loaded.identity.in_channels, 3);
  EXPECT_EQ(loaded.position.global_step, 1);
  EXPECT_EQ(loaded.position.samples_in_epoch, 32);
  EXPECT_EQ(loaded.position.train_images, 64);
  EXPECT_EQ(loaded.position.batch_size, 32);
  EXPECT_EQ(loaded.position.seed, options.seed);
  EXPECT_FALSE(loaded.position.generator_state.empty());

  const auto model_state = trainer.model().state_dict();
  ASSERT_EQ(loaded.model_state.size(), model_state.size());
  // Saved in name order; compare by name.
  for (const auto& [name, tensor] : model_state) {
    const auto it = std::find_if(loaded.model_state.begin(), loaded.model_state.end(),
                                 [&, wanted = name](const auto& entry) { return entry.first == wanted; });
    ASSERT_NE(it, loaded.model_state.end()) << name;
    ASSERT_EQ(it->second.sizes(), tensor.sizes()) << name;
    ASSERT_EQ(it->second.dtype(), tensor.dtype()) << name;
    EXPECT_EQ(std::memcmp(it->second.data_ptr(), tensor.contiguous().data_ptr(), tensor.nbytes()), 0) << name;
  }
  // SGD with momentum after one step: lr, step_count, per-parameter step and momentum buffer.
  EXPECT_EQ(loaded.optimizer_state.size(), trainer.optimizer().state_dict().size());
}

TEST(Checkpoint, CheckpointOfAnotherModelIsRefusedNamingBoth) {
  TrainOptions options = testing::small_synthetic_options(64);
  ScratchDir dir;
  const auto path = dir / "resnet20.safetensors";
  Trainer(options).save_checkpoint(path);

  TrainOptions other = options;
  other.model = "resnet32";
  Trainer trainer(other);
  const std::string message = error_text([&] { trainer.resume_from(path); });
  EXPECT_NE(message.find("resnet20"), std::string::npos) << message;
  EXPECT_NE(message.find("resnet32"), std::string::npos) << message;
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_THROW(trainer.resume_from(path), ValueError);
}

TEST(Checkpoint, CheckpointOfAnotherOptimizerOrDatasetSizeIsRefused) {
  TrainOptions options = testing::small_synthetic_options(64);
  ScratchDir dir;
  const auto path = dir / "sgd.safetensors";
  Trainer(options).save_checkpoint(path);

  TrainOptions adam = options;
  adam.optimizer = "adam";
  Trainer adam_trainer(adam);
  const std::string message = error_text([&] { adam_trainer.resume_from(path); });
  EXPECT_NE(message.find("optimizer sgd"), std::string::npos) << message;
  EXPECT_NE(message.find("optimizer adam"), std::string::npos) << message;

  TrainOptions bigger = options;
  bigger.limit_train = 96;
  Trainer bigger_trainer(bigger);
  const std::string size_message = error_text([&] { bigger_trainer.resume_from(path); });
  EXPECT_NE(size_message.find("64 images"), std::string::npos) << size_message;
  EXPECT_NE(size_message.find("96"), std::string::npos) << size_message;
}

TEST(Checkpoint, DamagedOrForeignFilesAreIoErrors) {
  TrainOptions options = testing::small_synthetic_options(64);
  ScratchDir dir;
  const auto good = dir / "good.safetensors";
  Trainer trainer(options);
  trainer.save_checkpoint(good);
  const auto size = std::filesystem::file_size(good);

  const auto truncated = dir / "truncated.safetensors";
  std::filesystem::copy_file(good, truncated);
  std::filesystem::resize_file(truncated, size / 2);
  EXPECT_THROW(trainer.resume_from(truncated), IoError);
  EXPECT_NE(error_text([&] { load_checkpoint(truncated); }).find(truncated.string()), std::string::npos);

  const auto garbled = dir / "garbled.safetensors";
  std::filesystem::copy_file(good, garbled);
  {
    std::fstream f(garbled, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);  // inside the JSON header
    f.write("\x01\x02\x03\x04", 4);
  }
  EXPECT_THROW(trainer.resume_from(garbled), IoError);

  const auto foreign = dir / "foreign.safetensors";
  io::save_safetensors(foreign, {{"w", io::make_f32_record({2}, std::vector<float>{1.0f, 2.0f})}});
  const std::string message = error_text([&] { load_checkpoint(foreign); });
  EXPECT_NE(message.find("not a sublet training checkpoint"), std::string::npos) << message;
  EXPECT_THROW(trainer.resume_from(foreign), IoError);

  EXPECT_THROW(trainer.resume_from(dir / "missing.safetensors"), IoError);
}

// One float changed in the data section: without the checksums such a file would resume silently
// into a broken model; the load names the file and the damaged tensor.
TEST(Checkpoint, ChangedTensorDataIsRefusedNamingTheTensor) {
  TrainOptions options = testing::small_synthetic_options(64);
  ScratchDir dir;
  const auto path = dir / "ck.safetensors";
  Trainer trainer(options);
  trainer.save_checkpoint(path);
  const io::SafetensorsFile before = io::load_safetensors(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-4, std::ios::end);  // the last 4 bytes: inside the last tensor's data
    char bytes[4];
    f.read(bytes, 4);
    bytes[1] ^= 0x10;
    f.seekp(-4, std::ios::end);
    f.write(bytes, 4);
  }
  // Which tensor's bytes changed, found independently of the checksums.
  const io::SafetensorsFile after = io::load_safetensors(path);
  std::string damaged;
  for (const auto& [name, record] : after.tensors)
    if (record.bytes != before.tensors.at(name).bytes) damaged = name;
  ASSERT_FALSE(damaged.empty());
  const std::string message = error_text([&] { load_checkpoint(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("checkpoint tensor '" + damaged + "' is damaged"), std::string::npos) << message;
  EXPECT_THROW(trainer.resume_from(path), IoError);
}

// Checkpoints written before the checksums existed still load.
TEST(Checkpoint, CheckpointWithoutChecksumsStillLoads) {
  TrainOptions options = testing::small_synthetic_options(64);
  ScratchDir dir;
  const auto path = dir / "ck.safetensors";
  Trainer trainer(options);
  trainer.save_checkpoint(path);
  io::SafetensorsFile file = io::load_safetensors(path);
  ASSERT_EQ(file.metadata.erase("tensor_crc32"), 1u);
  file.metadata.erase("planned_epochs");
  const auto old_style = dir / "old.safetensors";
  io::save_safetensors(old_style, file.tensors, file.metadata);
  EXPECT_EQ(load_checkpoint(old_style).position.planned_epochs, 0);
  trainer.resume_from(old_style);
}

TEST(Checkpoint, SavingOverAnOldCheckpointReplacesItWhole) {
  TrainOptions options = testing::small_synthetic_options(64);
  ScratchDir dir;
  const auto path = dir / "ck.safetensors";
  Trainer trainer(options);
  trainer.save_checkpoint(path);
  testing::run_steps(trainer, 2);
  trainer.save_checkpoint(path);
  EXPECT_EQ(load_checkpoint(path).position.global_step, 2);
  // Only the checkpoint itself is left: the temporary was renamed over it.
  int files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(path.parent_path())) ++files;
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace sublet::train
