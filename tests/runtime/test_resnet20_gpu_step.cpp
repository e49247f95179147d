// One ResNet-20 training step on the GPU against the same step on the CPU: same initial weights
// (drawn on the host from one seed, then copied), same batch, SGD with momentum.
// Tolerances (float32): loss within 1e-4 relative; every parameter gradient within
// 2e-3 * max|grad of that parameter| elementwise (cuDNN's convolution and batch-norm kernels sum
// in other orders than the CPU's im2col GEMMs, over 19 layers of backward); parameters after
// the update within lr * that gradient bound + 1e-6 (the first momentum step moves by lr * g).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph_training_support.h"
#include "memory/registry.h"
#include "runtime/optim/sgd.h"
#include "tests/nan_safe_max.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

struct StepResult {
  float loss = 0.0f;
  std::vector<std::vector<float>> grads;
  std::vector<std::vector<float>> params;
};

StepResult one_step(Device device, const Tensor& images, const Tensor& labels) {
  auto model = testing::resnet20_on(device, 2024);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(5e-4));
  Tensor loss = testing::eager_step(*model, sgd, images.to(device), labels.to(device));
  StepResult out;
  out.loss = loss.item<float>();
  for (const Tensor& p : model->parameters()) {
    out.grads.push_back(p.grad().to(Device::cpu()).to_vector<float>());
    out.params.push_back(p.detach().to(Device::cpu()).to_vector<float>());
  }
  return out;
}

TEST(ResNet20GpuStep, MatchesCpuLossAndGradients) {
  SUBLET_SKIP_WITHOUT_GPU("ResNet-20 GPU step vs CPU step");
  auto batch = testing::random_batches(1, {16, 3, 32, 32}, 10, 77).front();
  const StepResult cpu = one_step(Device::cpu(), batch.first, batch.second);
  const StepResult gpu = one_step(Device::cuda(0), batch.first, batch.second);
  EXPECT_TRUE(std::isfinite(cpu.loss));
  EXPECT_NEAR(gpu.loss, cpu.loss, 1e-4 * std::abs(cpu.loss));
  ASSERT_EQ(cpu.grads.size(), gpu.grads.size());
  ASSERT_GT(cpu.grads.size(), 50u) << "ResNet-20 has 65 parameter tensors";
  for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
    ASSERT_EQ(cpu.grads[i].size(), gpu.grads[i].size());
    float scale = 0.0f;
    for (float g : cpu.grads[i]) scale = testing::nan_safe_max(scale, std::abs(g));
    ASSERT_GT(scale, 0.0f) << "parameter " << i << " got a zero gradient on the CPU";
    float worst = 0.0f;
    for (std::size_t k = 0; k < cpu.grads[i].size(); ++k)
      worst = testing::nan_safe_max(worst, std::abs(gpu.grads[i][k] - cpu.grads[i][k]));
    EXPECT_LE(worst, 2e-3f * scale) << "gradient of parameter " << i << " (max |grad| " << scale << ")";
    float worst_param = 0.0f;
    for (std::size_t k = 0; k < cpu.params[i].size(); ++k)
      worst_param = testing::nan_safe_max(worst_param, std::abs(gpu.params[i][k] - cpu.params[i][k]));
    EXPECT_LE(worst_param, 0.05f * 2e-3f * scale + 1e-6f) << "parameter " << i << " after the update";
  }
}

}  // namespace
}  // namespace sublet
