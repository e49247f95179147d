// The device-side skip of loss-scaled steps on the CPU: amp::GradScaler hands the found-inf flag
// and the inverse scale to the fused SGD/Adam kernels, which skip or unscale without a host read
// (the CPU kernels read the flag from host memory through the same path as the CUDA ones, so
// these tests cover it; test_grad_scaler_cuda.cpp runs the same checks on the GPU, plus the CUDA
// graph). The checks are described in grad_scaler_checks.h. Also the ops-level contract of
// UpdateScalars' loss-scaling fields.
#include <gtest/gtest.h>

#include <limits>

#include "core/errors.h"
#include "grad_scaler_checks.h"
#include "ops/optim_update.h"

namespace sublet {
namespace {

TEST(GradScalerSkip, InfOrNaNChangesNothingBitForBit) { testing::skip_changes_nothing(Device::cpu()); }

TEST(GradScalerSkip, ASkippedFirstStepLeavesTheNextOneFirst) { testing::skipped_first_step(Device::cpu()); }

TEST(GradScalerSkip, ScaleSequenceOver50StepsWithInjectedInf) { testing::scale_sequence(Device::cpu()); }

TEST(GradScalerSkip, MarkNonFiniteFlagsInfAndNaNInOneLaunch) { testing::mark_non_finite_flags(Device::cpu()); }

TEST(GradScalerSkip, DevicePathMatchesTheHostPath) { testing::device_matches_host_path(Device::cpu()); }

TEST(GradScalerSkip, PlainStepsAndScaledStepsShareTheCounts) {
  testing::plain_steps_continue_the_counts(Device::cpu());
}

TEST(GradScalerSkip, OptimizerChecksTheScalerTensors) {
  auto params = testing::make_params({{4}}, DType::Float32, Device::cpu(), 1);
  optim::SGD sgd(params, optim::SGDOptions(0.1));
  testing::set_scaled_grads(params, 2, 1.0);
  EXPECT_THROW(sgd.step(optim::SkipIfNonFinite{}), ValueError);
  EXPECT_THROW(sgd.step(optim::SkipIfNonFinite{zeros({2}), Tensor()}), ValueError);
  EXPECT_THROW(sgd.step(optim::SkipIfNonFinite{zeros({1}, DType::Float64), Tensor()}), ValueError);
  EXPECT_THROW(sgd.step(optim::SkipIfNonFinite{zeros({1}), zeros({1}, DType::Float64)}), ValueError);
  EXPECT_EQ(sgd.step_count(), 0);
  EXPECT_EQ(sgd.step(optim::SkipIfNonFinite{zeros({1}), Tensor()}), optim::StepOutcome::DecidedOnDevice);
  EXPECT_EQ(sgd.step_count(), 1);
}

// ops level: a set flag leaves even the counts alone; the counts need the array and distinct slots.
TEST(GradScalerSkip, UpdateKernelsHonourTheFlagAndCheckTheCountSlots) {
  const ops::Context ctx = ops::Context::for_device(Device::cpu());
  std::vector<float> p{1.0f, 2.0f}, g{4.0f, 8.0f}, m{0.0f, 0.0f}, v{0.0f, 0.0f};
  std::vector<double> scalars{0.5, 3.0, 7.0};  // lr, t_0, t_1
  std::vector<ops::AdamTensor> tensors(1);
  tensors[0] = ops::AdamTensor{p.data(), g.data(), m.data(), v.data(), 2, 0, 1};
  const ops::AdamHyper hyper{};
  float flag = std::numeric_limits<float>::quiet_NaN(), inv = 0.25f;
  ops::UpdateScalars s;
  s.device = scalars.data();
  s.advance_counts = true;
  s.counter_slot = 0;
  s.found_inf = &flag;
  s.inv_scale = &inv;
  ops::adam_update(ctx, DType::Float32, tensors, hyper, s);
  EXPECT_EQ(p, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(g, (std::vector<float>{4.0f, 8.0f})) << "a skipped step does not unscale either";
  EXPECT_EQ(m, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(scalars, (std::vector<double>{0.5, 3.0, 7.0}));
  flag = 0.0f;
  ops::adam_update(ctx, DType::Float32, tensors, hyper, s);
  EXPECT_EQ(scalars, (std::vector<double>{0.5, 4.0, 8.0})) << "slot 1 (t) and the counter slot 0 advance";
  EXPECT_EQ(g, (std::vector<float>{1.0f, 2.0f})) << "the gradient ends unscaled";
  EXPECT_NE(p[0], 1.0f);

  tensors[0].step_slot = 0;  // the counter's slot too
  EXPECT_THROW(ops::adam_update(ctx, DType::Float32, tensors, hyper, s), ValueError);
  s.device = nullptr;
  s.counter_slot = -1;
  EXPECT_THROW(ops::adam_update(ctx, DType::Float32, tensors, hyper, s), ValueError);
}

}  // namespace
}  // namespace sublet
