// `sublet train` as a user runs it: bad flags, unknown models, a bad device, missing data each
// give one "error: ..." line and a non-zero exit, never a crash; a small synthetic run writes its
// metrics and checkpoint, and a second run resumes from that checkpoint; a GPT run takes a shape
// schedule (--seq-len-range, --shape-schedule) under the rules `bench step` and `profile` share.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "memory/registry.h"
#include "runtime/data/shape_schedule.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

RunResult run_sublet(const std::string& arguments) {
  const std::string command = std::string(SUBLET_BINARY) + " " + arguments + " 2>&1";
  RunResult result;
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe)) result.output += buffer.data();
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// One clear error: non-zero exit (not a signal), an "error" line naming `part`, no internal trace.
void expect_clear_error(const std::string& arguments, const std::string& part) {
  const RunResult r = run_sublet(arguments);
  EXPECT_GE(r.exit_code, 1) << arguments << "\n" << r.output;
  EXPECT_LT(r.exit_code, 128) << "crashed: " << arguments << "\n" << r.output;
  EXPECT_NE(r.output.find(part), std::string::npos) << arguments << "\n" << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
}

TEST(TrainCommand, UnknownModelNamesTheKnownOnes) {
  expect_clear_error("train --model resnet99 --device cpu", "resnet99");
  expect_clear_error("train --model resnet99 --device cpu", "resnet20");
}

TEST(TrainCommand, BadDeviceNegativeEpochsAndBadNumbers) {
  expect_clear_error("train --device gpu", "--device: unknown value 'gpu'");
  expect_clear_error("train --device cpu --epochs -1", "--epochs must be >= 1, got -1");
  expect_clear_error("train --device cpu --batch-size 0", "--batch-size must be >= 1");
  expect_clear_error("train --device cpu --epochs many", "--epochs");
  expect_clear_error("train --device cpu --no-such-flag", "--no-such-flag");
  expect_clear_error("train --device cpu --data synthetic --cuda-graph", "--cuda-graph needs a CUDA device");
}

TEST(TrainCommand, CudaWithoutAGpuIsOneClearLine) {
  if (memory::cuda_available()) GTEST_SKIP() << "a CUDA device is present: this checks the message without one";
  expect_clear_error("train --device cuda --data synthetic", "--device cuda");
}

TEST(TrainCommand, MissingDataSaysToRunTheFetchScript) {
  testing::ScratchDir dir;
  expect_clear_error("train --device cpu --data-dir " + (dir / "nothing").string(), "scripts/fetch_mnist.sh");
  expect_clear_error("train --device cpu --data cifar10 --data-dir " + (dir / "nothing").string(), "CIFAR-10 not found");
}

TEST(TrainCommand, SyntheticRunWritesMetricsAndCheckpointAndResumes) {
  testing::ScratchDir dir;
  const std::string common = "train --device cpu --data synthetic --synthetic-shape 1x8x8 --limit-train 64 "
                             "--limit-test 32 --batch-size 32 --seed 3 --checkpoint " +
                             (dir / "ck.safetensors").string() + " --metrics-json " + (dir / "m.json").string();
  const RunResult first = run_sublet(common + " --epochs 1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("epoch 1/1: train loss"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("peak reserved"), std::string::npos) << first.output;

  const RunResult second = run_sublet(common + " --epochs 2 --resume " + (dir / "ck.safetensors").string());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("epoch 1/2: train loss"), std::string::npos) << "epoch 1 was trained again";
  EXPECT_NE(second.output.find("epoch 2/2: train loss"), std::string::npos) << second.output;

  std::ifstream in(dir / "m.json");
  const nlohmann::json metrics = nlohmann::json::parse(in);
  EXPECT_EQ(metrics.at("model"), "resnet20");
  EXPECT_EQ(metrics.at("device"), "cpu");
  ASSERT_EQ(metrics.at("epochs").size(), 2u);  // the resumed run keeps the first run's epoch
  for (const char* key : {"epoch", "train_loss", "train_acc", "test_acc", "img_per_s", "peak_allocated_bytes",
                          "peak_reserved_bytes"}) {
    EXPECT_TRUE(metrics.at("epochs")[1].contains(key)) << key;
  }
  EXPECT_EQ(metrics.at("epochs")[1].at("epoch"), 2);
  EXPECT_EQ(metrics.at("final_test_acc"), metrics.at("epochs")[1].at("test_acc"));
  EXPECT_GT(metrics.at("epochs")[1].at("peak_allocated_bytes").get<std::int64_t>(), 0);
  // The host allocator never synchronises a device; the epoch that came from the checkpoint
  // keeps its recorded value too.
  for (const auto& epoch : metrics.at("epochs")) EXPECT_EQ(epoch.at("num_sync_all_streams"), 0) << epoch;
}

TEST(TrainCommand, ResumingWithAnotherModelIsRefused) {
  testing::ScratchDir dir;
  const std::string data = "--device cpu --data synthetic --synthetic-shape 1x8x8 --limit-train 32 --limit-test 16 "
                           "--batch-size 32 --epochs 1 ";
  const std::string checkpoint = (dir / "ck.safetensors").string();
  ASSERT_EQ(run_sublet("train " + data + "--checkpoint " + checkpoint).exit_code, 0);
  expect_clear_error("train " + data + "--model resnet32 --resume " + checkpoint, "was written for resnet20");
  expect_clear_error("train " + data + "--resume " + (dir / "absent.safetensors").string(), "no such file");
}

// A gpt-nano run on a small text, drawn from a range: the schedule it writes is the one the seed
// draws, a second run reads it back, and the metrics record it.
TEST(TrainCommand, GptRunsWithAShapeSchedule) {
  testing::ScratchDir dir;
  {
    std::ofstream text(dir / "text.txt");
    for (int i = 0; i < 100; ++i) text << "the cat sat on the mat. ";
  }
  const std::string base = "train --model gpt-nano --device cpu --data text --data-dir " + (dir / "text.txt").string() +
                           " --eval-interval 3 --eval-batches 1 ";
  const std::string data = base + "--seed 2 ";
  const std::string gpt = data + "--steps 6 ";
  const std::string range = "--seq-len-range 8:64 --tokens-per-batch 128 ";
  const std::string written = (dir / "s.json").string();
  const RunResult drawn = run_sublet(gpt + range + "--write-shape-schedule " + written + " --metrics-json " +
                                     (dir / "m.json").string());
  ASSERT_EQ(drawn.exit_code, 0) << drawn.output;
  EXPECT_NE(drawn.output.find("wrote " + written), std::string::npos) << drawn.output;
  EXPECT_NE(drawn.output.find("shape schedule seq 8..64"), std::string::npos) << drawn.output;
  EXPECT_NE(drawn.output.find("tok/s"), std::string::npos) << drawn.output;
  EXPECT_EQ(data::load_shape_schedule(written),
            data::token_schedule({.seed = 2, .steps = 6, .min_len = 8, .max_len = 64, .tokens_per_batch = 128}));
  std::ifstream in(dir / "m.json");
  const nlohmann::json metrics = nlohmann::json::parse(in);
  EXPECT_EQ(metrics.at("shape_schedule").at("seq_len_max"), 64);
  EXPECT_EQ(metrics.at("shape_schedule").at("seed"), 2);
  EXPECT_EQ(metrics.at("epochs").size(), 2u);

  const RunResult read = run_sublet(gpt + "--shape-schedule " + written);
  ASSERT_EQ(read.exit_code, 0) << read.output;
  EXPECT_NE(read.output.find("final validation loss"), std::string::npos) << read.output;

  // Resumed with more steps the CLI draws the schedule again from the seed: the 6 steps trained
  // keep their shapes and the run goes on to step 9; another seed would give them others.
  const std::string checkpoint = (dir / "ck.safetensors").string();
  ASSERT_EQ(run_sublet(gpt + range + "--checkpoint " + checkpoint).exit_code, 0);
  const RunResult resumed = run_sublet(data + "--steps 9 " + range + "--resume " + checkpoint);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + checkpoint + " at step 6 of 9"), std::string::npos) << resumed.output;
  EXPECT_NE(resumed.output.find("step 9: train loss"), std::string::npos) << resumed.output;
  expect_clear_error(base + "--seed 5 --steps 6 " + range + "--resume " + checkpoint, "gives its 6 steps other shapes");
  expect_clear_error(gpt + "--resume " + checkpoint, "was trained with a shape schedule");

  expect_clear_error(gpt + range + "--seq-len 32", "train --seq-len: the shape schedule sets every step's length");
  expect_clear_error(gpt + range + "--batch-size 4", "drop --batch-size");
  expect_clear_error(gpt + "--seq-len-range 8:72 --tokens-per-batch 128", "a length of 72 passes gpt-nano's context of 64");
  expect_clear_error(gpt + range + "--cuda-graph", "--cuda-graph replays one captured step of fixed shapes");
  // Fixed windows may be captured: only the device is missing here.
  expect_clear_error(gpt + "--seq-len 32 --cuda-graph", "--cuda-graph needs a CUDA device");
  expect_clear_error(gpt + "--seq-len-range 8:64", "--seq-len-range and --tokens-per-batch go together");
  expect_clear_error(gpt + "--write-shape-schedule " + (dir / "w.json").string(),
                     "--write-shape-schedule: writes the schedule drawn from --seq-len-range and --tokens-per-batch; "
                     "give one of them");
  expect_clear_error(data + "--steps 7 --shape-schedule " + written, "6 steps, but the run needs 7 (--steps)");
  expect_clear_error(gpt + "--resolutions 8,16", "--resolutions");  // an image flag train does not offer
  const std::string images = (dir / "images.json").string();
  data::save_shape_schedule(images, data::image_schedule({.seed = 1, .steps = 6, .batch_size = 2, .resolutions = {8}}));
  expect_clear_error(gpt + "--shape-schedule " + images, "gpt-nano takes token windows (--seq-len-range), the schedule holds images");
  expect_clear_error("train --device cpu --data synthetic --seq-len-range 8:64 --tokens-per-batch 128",
                     "--model resnet20 is an image model");
}

}  // namespace
}  // namespace sublet::train
