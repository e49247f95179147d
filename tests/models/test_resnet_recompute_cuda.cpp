// Recomputation on the GPU (models/resnet_recompute.h): recomputed runs of ResNet-20 blocks give
// the plain model's gradients within 1e-6 relative (the recomputation runs the same cuDNN
// engines, deterministic ones by default, on the same inputs, so in practice the difference is 0;
// the tolerance covers reductions with atomics), and a fitted budget holds on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "memory/registry.h"
#include "models/registry.h"
#include "models/resnet_recompute.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "tests/gpu_skip.h"

namespace sublet::models {
namespace {

const Device kGpu = Device::cuda(0);

std::shared_ptr<ResNet> resnet20_gpu() {
  auto model = std::dynamic_pointer_cast<ResNet>(create_model("resnet20", {.in_channels = 3, .num_classes = 10, .seed = 6}));
  model->to(kGpu);
  model->train();
  return model;
}

std::pair<Tensor, Tensor> batch(std::int64_t n) {
  Generator g(12);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
  return {randn({n, 3, 32, 32}, g).to(kGpu), Tensor::from_vector(labels, {n}).to(kGpu)};
}

std::vector<std::vector<float>> gradients(ResNet& model, const Tensor& x, const Tensor& y) {
  for (Tensor& p : model.parameters()) p.set_grad(Tensor());
  nn::functional::cross_entropy(model(x), y).backward();
  std::vector<std::vector<float>> out;
  for (const Tensor& p : model.parameters()) out.push_back(p.grad().to(Device::cpu()).to_vector<float>());
  return out;
}

TEST(ResNetRecomputeCuda, RecomputedRunsMatchThePlainGradients) {
  SUBLET_SKIP_WITHOUT_GPU("recomputed ResNet-20 blocks on the GPU");
  auto [x, y] = batch(32);
  auto plain = resnet20_gpu();
  auto recomputed = resnet20_gpu();
  apply_recompute(*recomputed, {{0, 1}, {1, 3}, {3, 4}, {4, 7}, {7, 10}});
  const auto expected = gradients(*plain, x, y);
  const auto got = gradients(*recomputed, x, y);
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), expected[i].size());
    for (std::size_t k = 0; k < got[i].size(); ++k) {
      const double d = std::abs(static_cast<double>(got[i][k]) - expected[i][k]) /
                       std::max(1e-3, std::abs(static_cast<double>(expected[i][k])));
      worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
  }
  std::cout << "largest relative gradient difference: " << worst << "\n";
  EXPECT_LE(worst, 1e-6);
}

TEST(ResNetRecomputeCuda, AFittedBudgetHoldsOnTheDevice) {
  SUBLET_SKIP_WITHOUT_GPU("a memory budget on the GPU");
  auto [x, y] = batch(256);
  auto model = resnet20_gpu();
  // 0.9: much lower fractions are out of reach (most of ResNet-20's GPU peak at this size is not
  // in the blocks' saved activations).
  const RecomputeReport r = fit_memory_budget(*model, memory::parse_memory_budget("0.9"), x, y, 0);
  std::cout << r.summary() << "\n";
  EXPECT_FALSE(r.runs.empty());
  EXPECT_LE(r.measured_peak, r.budget_bytes);
}

}  // namespace
}  // namespace sublet::models
