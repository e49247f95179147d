// GraphedTrainStep with MemoryPlan::Static: the planned capture trains exactly as the
// cached one does — the same loss sequence, bit for bit (deterministic cuDNN engines, the same
// kernels, only other addresses) — while its pool is one arena of the plan's size, served
// request by request at the planned offsets, and the arena is within 1% of the lower bound.
#include <gtest/gtest.h>

#include <cmath>

#include "graph_training_support.h"
#include "memory/registry.h"
#include "runtime/optim/sgd.h"
#include "runtime/step/graphed_train_step.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

const Shape kImages{16, 3, 16, 16};
constexpr int kSteps = 7;

struct PlannedRun {
  std::vector<float> losses;
  MemoryPlanReport report;
  std::size_t reserved_after = 0;
};

PlannedRun train(MemoryPlan plan) {
  const Device gpu = Device::cuda(0);
  memory::allocator_for(gpu).empty_cache();
  auto model = testing::resnet20_on(gpu, 23);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4).fused(true));
  GraphedTrainStep graphed(
      [&](const Tensor& x, const Tensor& y) { return testing::eager_step(*model, optimizer, x, y); }, optimizer,
      kImages, Shape{kImages[0]}, gpu, /*warmup_steps=*/2);
  graphed.set_memory_plan(plan);
  auto batches = testing::random_batches(kSteps, kImages, 10, 41);
  PlannedRun run;
  for (auto& [x, y] : batches) run.losses.push_back(graphed.run(x.to(gpu), y.to(gpu)).item<float>());
  EXPECT_TRUE(graphed.graphed());
  run.report = graphed.memory_plan_report();
  run.reserved_after = memory::allocator_for(gpu).memory_reserved();
  return run;
}

TEST(PlannedGraphStep, StaticPlanGivesTheCachedPlansLossesBitForBit) {
  SUBLET_SKIP_WITHOUT_GPU("planned vs cached CUDA-graph ResNet-20 steps");
  const PlannedRun cached = train(MemoryPlan::Cached);
  const PlannedRun planned = train(MemoryPlan::Static);
  ASSERT_EQ(cached.losses.size(), planned.losses.size());
  for (std::size_t i = 0; i < cached.losses.size(); ++i) {
    EXPECT_TRUE(std::isfinite(cached.losses[i])) << "step " << i;
    EXPECT_EQ(planned.losses[i], cached.losses[i]) << "step " << i;  // bit for bit (fails on NaN)
  }
  EXPECT_NE(cached.losses.front(), cached.losses.back()) << "training should change the loss";

  const MemoryPlanReport& r = planned.report;
  EXPECT_EQ(r.plan, MemoryPlan::Static);
  EXPECT_EQ(r.abandoned, "");
  EXPECT_GT(r.requests, 100u) << "a ResNet-20 step makes hundreds of requests";
  EXPECT_EQ(r.served, r.requests);
  EXPECT_GE(r.arena_bytes, r.lower_bound_bytes);
  EXPECT_LE(static_cast<double>(r.arena_bytes), 1.01 * static_cast<double>(r.lower_bound_bytes)) << r.heuristic;
  EXPECT_LE(planned.reserved_after, cached.reserved_after) << "the arena should not hold more than the cached pool";
}

}  // namespace
}  // namespace sublet
