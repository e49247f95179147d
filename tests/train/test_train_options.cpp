// The checks behind `sublet train`'s flags: each bad value is one ValueError naming the flag and
// what is allowed; missing data says how to get it; a CUDA request without CUDA is a DeviceError.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/errors.h"
#include "memory/registry.h"
#include "runtime/data/mnist.h"
#include "train/data_setup.h"
#include "train/train_options.h"
#include "train_test_support.h"

namespace sublet::train {
namespace {

// The message of the ValueError validate() throws for `options`, or a failure.
std::string validation_message(const TrainOptions& options) {
  try {
    validate(options);
  } catch (const ValueError& e) {
    return e.what();
  }
  ADD_FAILURE() << "validate() accepted the options";
  return {};
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(TrainOptions, DefaultsAreValid) {
  EXPECT_NO_THROW(validate(TrainOptions{}));
  EXPECT_EQ(TrainOptions{}.model, "resnet20");
  EXPECT_EQ(TrainOptions{}.data, "mnist");
  EXPECT_EQ(default_data_dir("mnist"), "data/mnist");
  EXPECT_DOUBLE_EQ(default_lr("sgd"), 0.1);
  EXPECT_DOUBLE_EQ(default_lr("adamw"), 1e-3);
}

TEST(TrainOptions, UnknownNamesListTheKnownOnes) {
  TrainOptions o;
  o.model = "resnet99";
  const std::string model = validation_message(o);
  expect_contains(model, "--model");
  expect_contains(model, "resnet99");
  expect_contains(model, "resnet56");

  o = {};
  o.data = "imagenet";
  expect_contains(validation_message(o), "mnist, cifar10, synthetic");
  o = {};
  o.optimizer = "rmsprop";
  expect_contains(validation_message(o), "sgd, adam, adamw");
  o = {};
  o.schedule = "linear";
  expect_contains(validation_message(o), "none, step, cosine");
  o = {};
  o.device = "gpu";
  const std::string device = validation_message(o);
  expect_contains(device, "--device");
  expect_contains(device, "'gpu'");
}

TEST(TrainOptions, OutOfRangeNumbersNameTheFlagAndTheValue) {
  TrainOptions o;
  o.epochs = -1;
  const std::string epochs = validation_message(o);
  expect_contains(epochs, "--epochs must be >= 1");
  expect_contains(epochs, "-1");
  o = {};
  o.batch_size = 0;
  expect_contains(validation_message(o), "--batch-size must be >= 1, got 0");
  o = {};
  o.limit_train = -5;
  expect_contains(validation_message(o), "--limit-train");
  o = {};
  o.lr = -0.1;
  expect_contains(validation_message(o), "--lr");
  o = {};
  o.label_smoothing = 1.0;
  expect_contains(validation_message(o), "--label-smoothing must be in [0, 1), got 1");
}

TEST(TrainOptions, CudaGraphNeedsACudaDevice) {
  TrainOptions o = testing::small_synthetic_options(32);  // device cpu
  o.cuda_graph = true;
  EXPECT_NO_THROW(validate(o));
  try {
    Trainer trainer(o);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    expect_contains(e.what(), "--cuda-graph needs a CUDA device");
  }
}

// GPT runs of fixed shapes take --cuda-graph like the image models: validate() passes, and the
// trainer asks for the GPU (a shape schedule with it stays refused: test_trainer_shape_schedule).
TEST(TrainOptions, GptCudaGraphNeedsOnlyACudaDevice) {
  const std::filesystem::path text = std::filesystem::temp_directory_path() / "sublet_gpt_cuda_graph_options.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << "the captured step replays the same kernels. ";
  }
  TrainOptions o = testing::gpt_nano_text_options(text, 4);
  o.cuda_graph = true;
  EXPECT_NO_THROW(validate(o));
  try {
    Trainer trainer(o);
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    expect_contains(e.what(), "--cuda-graph needs a CUDA device");
  }
  std::filesystem::remove(text);
}

TEST(TrainOptions, CudaWithoutAGpuIsADeviceError) {
  if (memory::cuda_available()) GTEST_SKIP() << "a CUDA device is present: this checks the message without one";
  EXPECT_THROW(resolve_device("cuda"), DeviceError);
  EXPECT_EQ(resolve_device("auto"), Device::cpu());
  EXPECT_EQ(resolve_device("cpu"), Device::cpu());
}

TEST(TrainOptions, MissingMnistSaysToRunTheFetchScript) {
  testing::ScratchDir dir;
  TrainOptions o;
  o.data_dir = dir / "no-mnist-here";
  try {
    load_training_data(o);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    expect_contains(e.what(), "scripts/fetch_mnist.sh");
    expect_contains(e.what(), "no-mnist-here");
  }
}

TEST(TrainOptions, MissingFashionMnistNamesTheDebianPackage) {
  testing::ScratchDir dir;
  TrainOptions o;
  o.data = "fashion-mnist";
  o.data_dir = dir / "no-fashion-here";
  try {
    load_training_data(o);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    expect_contains(e.what(), "Fashion-MNIST not found");
    expect_contains(e.what(), "dataset-fashion-mnist");
    expect_contains(e.what(), "no-fashion-here");
  }
}

// Debian's dataset-fashion-mnist is the full dataset (60,000 / 10,000 images of 28x28), and the
// normalisation sublet uses is the training split's own pixel statistics.
TEST(TrainOptions, FashionMnistFromTheDebianPackage) {
  const std::filesystem::path dir = default_data_dir("fashion-mnist");
  if (!std::filesystem::exists(dir / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (" << dir << "): checks its split sizes and statistics";
  const data::ImageDataset full_train = data::load_mnist(dir, data::MnistSplit::train);
  EXPECT_EQ(full_train.size(), 60000);
  EXPECT_EQ(data::load_mnist(dir, data::MnistSplit::test).size(), 10000);

  TrainOptions o;
  o.data = "fashion-mnist";
  o.limit_train = 100;
  o.limit_test = 50;
  const TrainingData data = load_training_data(o);
  EXPECT_EQ(data.train->size(), 100);
  EXPECT_EQ(data.test->size(), 50);
  EXPECT_EQ(data.train->name, "fashion-mnist-train");
  EXPECT_EQ(data.train->channels, 1);
  EXPECT_EQ(data.train->height, 28);
  EXPECT_TRUE(data.augmentation.horizontal_flip);

  double sum = 0, sum_sq = 0;
  const std::int64_t plane = full_train.height * full_train.width;
  for (std::int64_t i = 0; i < full_train.size(); ++i) {
    const auto pixels = full_train.sample_pixels(i);
    for (std::int64_t p = 0; p < plane; ++p) {
      const double v = pixels[static_cast<std::size_t>(p)] / 255.0;
      sum += v;
      sum_sq += v * v;
    }
  }
  const double count = static_cast<double>(full_train.size() * plane);
  const double mean = sum / count;
  const double stddev = std::sqrt(sum_sq / count - mean * mean);
  EXPECT_TRUE(std::abs(mean - data.normalization.mean[0]) <= 5e-4) << mean;
  EXPECT_TRUE(std::abs(stddev - data.normalization.stddev[0]) <= 5e-4) << stddev;
}

TEST(TrainOptions, LimitsKeepTheFirstImagesAndSyntheticNormalisationIsTheDataset) {
  TrainOptions o = testing::small_synthetic_options(100);
  o.limit_test = 30;
  const TrainingData data = load_training_data(o);
  EXPECT_EQ(data.train->size(), 100);
  EXPECT_EQ(data.test->size(), 30);
  ASSERT_EQ(data.normalization.mean.size(), 3u);
  // Normalised with its own statistics: the training pixels have mean 0 and std 1 afterwards.
  const data::Normalization& n = data.normalization;
  double sum = 0, sum_sq = 0;
  const std::int64_t plane = data.train->height * data.train->width;
  for (std::int64_t i = 0; i < data.train->size(); ++i) {
    const auto pixels = data.train->sample_pixels(i);
    for (std::int64_t p = 0; p < plane; ++p) {  // channel 0
      const double v = (pixels[static_cast<std::size_t>(p)] / 255.0 - n.mean[0]) / n.stddev[0];
      sum += v;
      sum_sq += v * v;
    }
  }
  const double count = static_cast<double>(data.train->size() * plane);
  EXPECT_NEAR(sum / count, 0.0, 1e-4);
  EXPECT_NEAR(sum_sq / count, 1.0, 1e-3);
}

}  // namespace
}  // namespace sublet::train
