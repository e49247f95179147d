// CUDA graph capture of whole training steps (ResNet-20, forward + backward + fused optimizer):
//  - the graphed run (2 eager warm-up steps, then capture + replays) gives the eager run's loss
//    sequence from the same initial state, including an lr change half-way (read by the fused
//    kernel from device memory) and Adam's bias correction (per-step counts on the device).
//    Tolerance: 1e-4 relative per loss and 1e-3 on the final parameters: both runs use the same
//    cuDNN algorithms, so differences come only from atomics in reductions (usually none at all);
//  - replays make no allocator call: allocation counters and driver calls stay unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "fused_optim_support.h"
#include "graph_training_support.h"
#include "memory/registry.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"
#include "runtime/step/cuda_graph.h"
#include "runtime/step/graphed_train_step.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

const Shape kImages{8, 3, 16, 16};
constexpr int kSteps = 8;

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct Run {
  std::vector<float> losses;
  std::vector<Tensor> params;
};

Run train(bool graphed, const MakeOptimizer& make) {
  const Device gpu = Device::cuda(0);
  auto model = testing::resnet20_on(gpu, 17);
  auto optimizer = make(model->parameters());
  auto batches = testing::random_batches(kSteps, kImages, 10, 99);
  Run run;
  std::unique_ptr<GraphedTrainStep> graph;
  if (graphed) {
    graph = std::make_unique<GraphedTrainStep>(
        [&](const Tensor& x, const Tensor& y) { return testing::eager_step(*model, *optimizer, x, y); }, *optimizer,
        kImages, Shape{kImages[0]}, gpu, /*warmup_steps=*/2);
  }
  for (int step = 0; step < kSteps; ++step) {
    if (step == 5) optimizer->set_lr(optimizer->lr() * 0.3);  // a schedule's change after the capture
    const Tensor images = batches[step].first.to(gpu), labels = batches[step].second.to(gpu);
    Tensor loss = graphed ? graph->run(images, labels) : testing::eager_step(*model, *optimizer, images, labels);
    run.losses.push_back(loss.item<float>());
  }
  if (graphed) {
    EXPECT_TRUE(graph->graphed());
  }
  for (const Tensor& p : model->parameters()) run.params.push_back(p.detach().to(Device::cpu()));
  return run;
}

void expect_same_training(const MakeOptimizer& make, const char* name) {
  const Run eager = train(false, make);
  const Run graphed = train(true, make);
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  for (std::size_t i = 0; i < eager.losses.size(); ++i) {
    EXPECT_TRUE(std::isfinite(eager.losses[i])) << name << " step " << i;
    EXPECT_NEAR(graphed.losses[i], eager.losses[i], 1e-4 * std::max(1.0f, std::abs(eager.losses[i])))
        << name << " step " << i;
  }
  EXPECT_NE(eager.losses.front(), eager.losses.back()) << name << ": training should change the loss";
  EXPECT_LE(testing::max_relative_difference(graphed.params, eager.params), 1e-3) << name;
}

TEST(CudaGraph, SgdStepMatchesEagerLossSequence) {
  SUBLET_SKIP_WITHOUT_GPU("graphed ResNet-20 SGD steps vs eager steps");
  expect_same_training(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));
      },
      "sgd");
}

TEST(CudaGraph, AdamStepMatchesEagerLossSequence) {
  SUBLET_SKIP_WITHOUT_GPU("graphed ResNet-20 Adam steps vs eager steps");
  expect_same_training(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(std::move(p), optim::AdamOptions(1e-3).weight_decay(0.01));
      },
      "adamw");
}

TEST(CudaGraph, ReplayMakesNoAllocatorCalls) {
  SUBLET_SKIP_WITHOUT_GPU("allocator counters across graph replays");
  const Device gpu = Device::cuda(0);
  auto model = testing::resnet20_on(gpu, 5);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  GraphedTrainStep graphed(
      [&](const Tensor& x, const Tensor& y) { return testing::eager_step(*model, optimizer, x, y); }, optimizer,
      kImages, Shape{kImages[0]}, gpu, /*warmup_steps=*/2);
  auto batches = testing::random_batches(4, kImages, 10, 3);
  std::vector<std::pair<Tensor, Tensor>> on_gpu;
  for (auto& [x, y] : batches) on_gpu.emplace_back(x.to(gpu), y.to(gpu));
  for (int i = 0; i < 3; ++i) graphed.run(on_gpu[i % 4].first, on_gpu[i % 4].second);  // 2 eager + capture
  ASSERT_TRUE(graphed.graphed());
  EXPECT_GT(graphed.graph().node_count(), 100u) << "a ResNet-20 step is hundreds of kernels";
  graphed.graph().synchronize();
  auto& allocator = memory::allocator_for(gpu);
  const memory::DeviceStats before = allocator.stats();
  float last = 0.0f;
  for (int i = 0; i < 10; ++i) {
    graphed.run(on_gpu[i % 4].first, on_gpu[i % 4].second);  // device-to-device copies into the static inputs
    last = graphed.replay_static().item<float>();            // and a replay on what they hold
  }
  const memory::DeviceStats after = allocator.stats();
  using memory::StatType;
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_EQ(after.allocation[StatType::All].allocated, before.allocation[StatType::All].allocated);
  EXPECT_EQ(after.allocation[StatType::All].freed, before.allocation[StatType::All].freed);
  EXPECT_EQ(after.num_device_alloc, before.num_device_alloc);
  EXPECT_EQ(after.num_device_free, before.num_device_free);
  EXPECT_EQ(after.reserved_bytes[StatType::All].current, before.reserved_bytes[StatType::All].current);
  EXPECT_EQ(graphed.steps(), 23);
  EXPECT_EQ(optimizer.step_count(), 23);
}

TEST(CudaGraph, CaptureOfAHostSyncFailsCleanly) {
  // .item() inside a capture cannot work; the error must surface and the stream stay usable.
  SUBLET_SKIP_WITHOUT_GPU("a failing capture");
  const Device gpu = Device::cuda(0);
  Tensor x = full({4}, 2.0, TensorOptions().device(gpu));
  CudaGraph graph(gpu);
  EXPECT_ANY_THROW(graph.capture([&] { (void)x.add(1.0).sum().item<float>(); }));
  EXPECT_FALSE(graph.captured());
  EXPECT_FLOAT_EQ(x.add(1.0).sum().item<float>(), 12.0f);
}

}  // namespace
}  // namespace sublet
