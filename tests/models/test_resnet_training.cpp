// ResNet-20 trains on the CPU (the end-to-end check of layers, autograd, loss and SGD), and its
// memory behaves: activations are released during backward, and everything a model, its
// optimizer and a few steps allocated is returned when they go out of scope.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <vector>

#include "memory/registry.h"
#include "models/registry.h"
#include "runtime/data/synthetic.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/optim/sgd.h"

namespace sublet {
namespace {

// Batches cut in order from a synthetic dataset, as float tensors in [0, 1].
class SyntheticBatches {
 public:
  SyntheticBatches(const data::SyntheticOptions& options, std::int64_t batch_size)
      : dataset_(data::make_synthetic_dataset(options)), batch_size_(batch_size) {}

  std::pair<Tensor, Tensor> next() {
    const std::int64_t numel = dataset_.sample_numel();
    std::vector<float> pixels(static_cast<std::size_t>(batch_size_ * numel));
    std::vector<std::int64_t> labels(static_cast<std::size_t>(batch_size_));
    for (std::int64_t i = 0; i < batch_size_; ++i, cursor_ = (cursor_ + 1) % dataset_.size()) {
      const std::vector<float> sample = dataset_.sample_floats(cursor_);
      std::memcpy(pixels.data() + i * numel, sample.data(), sample.size() * sizeof(float));
      labels[static_cast<std::size_t>(i)] = dataset_.labels[static_cast<std::size_t>(cursor_)];
    }
    return {Tensor::from_vector(pixels, {batch_size_, dataset_.channels, dataset_.height, dataset_.width}),
            Tensor::from_vector(labels, {batch_size_})};
  }

 private:
  data::ImageDataset dataset_;
  std::int64_t batch_size_;
  std::int64_t cursor_ = 0;
};

data::SyntheticOptions small_task() {
  data::SyntheticOptions o;
  o.channels = 3;
  o.height = 16;
  o.width = 16;
  o.num_classes = 10;
  o.size = 640;
  o.task_seed = 5;
  o.sample_seed = 6;
  return o;
}

float train_step(nn::Module& model, optim::Optimizer& optimizer, const Tensor& images, const Tensor& labels) {
  optimizer.zero_grad();
  const Tensor loss = nn::functional::cross_entropy(model(images), labels);
  loss.backward();
  optimizer.step();
  return loss.item<float>();
}

TEST(ResNetTraining, ResNet20LearnsASyntheticTaskOnTheCpu) {
  constexpr int kSteps = 40;
  const auto start = std::chrono::steady_clock::now();
  auto model = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 1});
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  SyntheticBatches batches(small_task(), 32);

  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    auto [images, labels] = batches.next();
    losses.push_back(train_step(*model, optimizer, images, labels));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The first loss is the untrained model's (about ln 10 = 2.3); the final one is averaged over
  // the last 5 batches so that one lucky batch cannot pass the test.
  const float initial = losses.front();
  float final_loss = 0;
  for (int i = kSteps - 5; i < kSteps; ++i) final_loss += losses[static_cast<std::size_t>(i)] / 5;
  std::cout << "[resnet20 training] initial loss " << initial << ", mean of last 5 " << final_loss << " after "
            << kSteps << " steps of batch 32 (3x16x16), " << seconds << " s\n";
  RecordProperty("initial_loss", std::to_string(initial));
  RecordProperty("final_loss", std::to_string(final_loss));
  RecordProperty("seconds", std::to_string(seconds));
  EXPECT_GT(initial, 1.5f);
  EXPECT_LT(final_loss, 0.5f * initial);
  for (float l : losses) EXPECT_TRUE(std::isfinite(l));
}

TEST(ResNetMemory, ActivationMemoryFallsDuringBackward) {
  auto model = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 2});
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  SyntheticBatches batches(small_task(), 32);
  std::size_t parameter_bytes = 0;
  for (const Tensor& p : model->parameters()) parameter_bytes += p.nbytes();

  for (int step = 0; step < 2; ++step) {  // the second step runs with momentum buffers in place
    auto [images, labels] = batches.next();
    optimizer.zero_grad();
    const std::size_t before_forward = memory_allocated(Device::cpu());
    const Tensor loss = nn::functional::cross_entropy((*model)(images), labels);
    const std::size_t backward_start = memory_allocated(Device::cpu());
    loss.backward();
    const std::size_t backward_end = memory_allocated(Device::cpu());
    // The graph holds every layer's saved activations (megabytes for this batch); backward frees
    // each node's as it runs, leaving the gradients (one per parameter) and the loss.
    EXPECT_GT(backward_start - before_forward, 4 * parameter_bytes);
    EXPECT_LT(backward_end, backward_start);
    EXPECT_LE(backward_end - before_forward, parameter_bytes + 64 * 1024);
    optimizer.step();
  }
}

TEST(ResNetMemory, ModelOptimizerAndStepsGiveBackEverything) {
  const std::size_t before = memory_allocated(Device::cpu());
  {
    auto model = models::create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 3});
    optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    SyntheticBatches batches(small_task(), 16);
    for (int step = 0; step < 3; ++step) {
      auto [images, labels] = batches.next();
      train_step(*model, optimizer, images, labels);
    }
    EXPECT_GT(memory_allocated(Device::cpu()), before);
  }
  EXPECT_EQ(memory_allocated(Device::cpu()), before);
}

}  // namespace
}  // namespace sublet
