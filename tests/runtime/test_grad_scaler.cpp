// amp::GradScaler on the CPU (the same device ops run on the GPU): PyTorch's defaults, unscaling
// exactly, the step skipped on inf and on NaN with the scale backed off, growth after
// growth_interval finite steps, and its errors. Each behaviour through both paths of step(): the
// fused SGD kernels deciding the skip (step() returns DecidedOnDevice) and the per-parameter
// SGD, whose flag is read on the host (Stepped or Skipped). test_grad_scaler_skip.cpp has the
// device-side skip's own checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/errors.h"
#include "runtime/amp/grad_scaler.h"
#include "runtime/factories.h"
#include "runtime/optim/sgd.h"

namespace sublet::amp {
namespace {

struct OneParameter {
  explicit OneParameter(bool fused) : sgd({w}, optim::SGDOptions(0.1).momentum(0.9).fused(fused)), fused(fused) {}
  Tensor w = Tensor::from_vector(std::vector<float>{1.0f, -2.0f, 3.0f}, {3}, TensorOptions().requires_grad(true));
  optim::SGD sgd;
  bool fused;
  // Gradient `values` on w, as a scaled backward would leave it.
  void set_grad(std::vector<float> values) { w.set_grad(Tensor::from_vector(values, {3})); }
  // What step() says: DecidedOnDevice with the fused kernels, else whether the step ran.
  void expect_result(optim::StepOutcome result, bool ran) const {
    using optim::StepOutcome;
    EXPECT_EQ(result, fused ? StepOutcome::DecidedOnDevice : ran ? StepOutcome::Stepped : StepOutcome::Skipped);
  }
};

const bool kBothPaths[] = {false, true};

TEST(GradScaler, PyTorchsDefaults) {
  const GradScaler scaler(Device::cpu());
  EXPECT_EQ(scaler.current_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(scaler.options().growth_factor, 2.0);
  EXPECT_EQ(scaler.options().backoff_factor, 0.5);
  EXPECT_EQ(scaler.options().growth_interval, 2000);
}

TEST(GradScaler, ScaledBackwardThenUnscaleGivesTheTrueGradientsExactly) {
  for (const bool fused : kBothPaths) {
    OneParameter s(fused);
    GradScaler scaler(Device::cpu());
    const Tensor loss = (s.w * s.w).sum();  // d/dw = 2w
    scaler.scale(loss).backward();
    EXPECT_EQ(s.w.grad().to_vector<float>(), (std::vector<float>{131072.0f, -262144.0f, 393216.0f}));
    scaler.unscale_(s.sgd);
    EXPECT_EQ(s.w.grad().to_vector<float>(), (std::vector<float>{2.0f, -4.0f, 6.0f}));
    s.expect_result(scaler.step(s.sgd), true);
    EXPECT_EQ(s.w.to_vector<float>(), (std::vector<float>{0.8f, -1.6f, 2.4f})) << fused;
    scaler.update();
    EXPECT_EQ(scaler.current_scale(), 65536.0);
    EXPECT_EQ(scaler.growth_tracker(), 1);
  }
}

TEST(GradScaler, StepUnscalesWhenUnscaleWasNotCalledAndLeavesTheGradientUnscaled) {
  // Without unscale_, the fused kernels unscale in the update (and write the gradient back).
  for (const bool fused : kBothPaths) {
    OneParameter s(fused);
    GradScaler scaler(Device::cpu());
    scaler.scale((s.w * s.w).sum()).backward();
    s.expect_result(scaler.step(s.sgd), true);
    EXPECT_EQ(s.w.grad().to_vector<float>(), (std::vector<float>{2.0f, -4.0f, 6.0f})) << fused;
    EXPECT_EQ(s.w.to_vector<float>(), (std::vector<float>{0.8f, -1.6f, 2.4f})) << fused;
    EXPECT_EQ(s.sgd.param_step(0), 1);
    EXPECT_EQ(s.sgd.step_count(), 1);
  }
}

TEST(GradScaler, InfOrNaNSkipsTheStepAndHalvesTheScale) {
  for (const float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    for (const bool fused : kBothPaths) {
      OneParameter s(fused);
      GradScaler scaler(Device::cpu());
      s.set_grad({1.0f, bad, 1.0f});
      s.expect_result(scaler.step(s.sgd), false);
      EXPECT_EQ(s.w.to_vector<float>(), (std::vector<float>{1.0f, -2.0f, 3.0f})) << "parameters untouched";
      EXPECT_EQ(s.sgd.param_step(0), 0) << "no optimizer state advanced";
      EXPECT_EQ(s.sgd.step_count(), 0);
      scaler.update();
      EXPECT_EQ(scaler.current_scale(), 32768.0) << bad;
      EXPECT_EQ(scaler.growth_tracker(), 0);
    }
  }
}

TEST(GradScaler, GrowsAfterTheIntervalOfFiniteStepsAndABadStepRestartsTheCount) {
  for (const bool fused : kBothPaths) {
    OneParameter s(fused);
    GradScaler scaler(Device::cpu(), GradScalerOptions{.init_scale = 1024.0, .growth_interval = 3});
    const auto finite_step = [&] {
      s.set_grad({1024.0f, 1024.0f, 1024.0f});
      s.expect_result(scaler.step(s.sgd), true);
      scaler.update();
    };
    finite_step();
    finite_step();
    EXPECT_EQ(scaler.current_scale(), 1024.0);
    EXPECT_EQ(scaler.growth_tracker(), 2);
    s.set_grad({std::numeric_limits<float>::infinity(), 0.0f, 0.0f});
    s.expect_result(scaler.step(s.sgd), false);
    scaler.update();
    EXPECT_EQ(scaler.current_scale(), 512.0);
    EXPECT_EQ(scaler.growth_tracker(), 0);
    finite_step();
    finite_step();
    EXPECT_EQ(scaler.current_scale(), 512.0);
    finite_step();  // the third finite step in a row
    EXPECT_EQ(scaler.current_scale(), 1024.0);
    EXPECT_EQ(scaler.growth_tracker(), 0);
    EXPECT_EQ(s.sgd.step_count(), 5) << "the skipped step is not counted";
  }
}

TEST(GradScaler, UnscaleTwiceInOneStepIsAnError) {
  for (const bool fused : kBothPaths) {
    OneParameter s(fused);
    GradScaler scaler(Device::cpu());
    s.set_grad({1.0f, 1.0f, 1.0f});
    scaler.unscale_(s.sgd);
    EXPECT_THROW(scaler.unscale_(s.sgd), Error);
    s.expect_result(scaler.step(s.sgd), true);  // step() after an explicit unscale_ does not unscale again
    EXPECT_EQ(s.w.grad().to_vector<float>()[0], 1.0f / 65536.0f);
    EXPECT_EQ(s.w.to_vector<float>()[0], 1.0f - 0.1f * (1.0f / 65536.0f));
    scaler.update();
    scaler.unscale_(s.sgd);  // a new step
  }
}

TEST(GradScaler, DisabledPassesEverythingThrough) {
  OneParameter s(true);
  GradScaler scaler(Device::cpu(), GradScalerOptions{.enabled = false});
  const Tensor loss = s.w.sum();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  s.set_grad({std::numeric_limits<float>::infinity(), 0.0f, 0.0f});
  EXPECT_EQ(scaler.step(s.sgd), optim::StepOutcome::Stepped);
  scaler.update();
  EXPECT_EQ(scaler.current_scale(), 1.0);
}

TEST(GradScaler, BadOptionsAreRefused) {
  EXPECT_THROW(GradScaler(Device::cpu(), GradScalerOptions{.init_scale = 0.0}), ValueError);
  EXPECT_THROW(GradScaler(Device::cpu(), GradScalerOptions{.growth_factor = 1.0}), ValueError);
  EXPECT_THROW(GradScaler(Device::cpu(), GradScalerOptions{.backoff_factor = 1.0}), ValueError);
  EXPECT_THROW(GradScaler(Device::cpu(), GradScalerOptions{.growth_interval = 0}), ValueError);
  EXPECT_THROW(GradScaler(Device::cpu(), GradScalerOptions{.init_scale = std::nan("")}), ValueError);
}

}  // namespace
}  // namespace sublet::amp
