// The fused (multi-tensor) CPU updates against the per-parameter Tensor-op path they replace:
// same parameters, same gradients, several steps (so momentum and Adam's bias correction are
// exercised past the first step), one parameter left without a gradient on some steps.
// Tolerances: float64 1e-12 relative (the two paths may contract a*b+c into an FMA differently),
// float32 2e-6 relative after 5 steps (a few float32 roundings).
#include <functional>

#include "fused_optim_support.h"
#include "core/errors.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/sgd.h"

namespace sublet {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>, bool fused)>;

double run_twins(DType dtype, const MakeOptimizer& make, int steps = 5) {
  const auto shapes = testing::fused_test_shapes();
  auto reference = testing::make_params(shapes, dtype, Device::cpu(), 11);
  auto fused = testing::make_params(shapes, dtype, Device::cpu(), 11);
  auto reference_opt = make(reference, false);
  auto fused_opt = make(fused, true);
  for (int step = 0; step < steps; ++step) {
    const std::int64_t skip = step == 1 ? 2 : -1;  // parameter 2 misses one update (its own step count)
    testing::set_random_grads(reference, 100 + step, skip);
    testing::set_random_grads(fused, 100 + step, skip);
    reference_opt->step();
    fused_opt->step();
  }
  EXPECT_EQ(fused_opt->param_step(2), reference_opt->param_step(2));
  EXPECT_EQ(fused_opt->param_step(0), steps);
  return testing::max_relative_difference(fused, reference);
}

struct Case {
  const char* name;
  MakeOptimizer make;
};

std::vector<Case> cases() {
  return {
      {"sgd plain", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1).fused(f));
       }},
      {"sgd momentum dampening weight_decay", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::SGD>(
             std::move(p), optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(5e-4).fused(f));
       }},
      {"sgd nesterov", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::SGD>(std::move(p),
                                             optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-4).fused(f));
       }},
      {"adam", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(1e-2).fused(f));
       }},
      {"adam l2", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::Adam>(std::move(p),
                                              optim::AdamOptions(1e-2).betas(0.8, 0.99).weight_decay(0.1).fused(f));
       }},
      {"adamw", [](std::vector<Tensor> p, bool f) {
         return std::make_unique<optim::AdamW>(std::move(p), optim::AdamOptions(1e-2).weight_decay(0.05).fused(f));
       }},
  };
}

TEST(FusedOptim, Float64MatchesTensorOpPath) {
  for (const Case& c : cases()) {
    const double diff = run_twins(DType::Float64, c.make);
    EXPECT_LE(diff, 1e-12) << c.name;
  }
}

TEST(FusedOptim, Float32MatchesTensorOpPath) {
  for (const Case& c : cases()) {
    const double diff = run_twins(DType::Float32, c.make);
    EXPECT_LE(diff, 2e-6) << c.name;
  }
}

TEST(FusedOptim, ParametersActuallyMove) {
  // Guards the comparison above against two paths that both do nothing.
  auto params = testing::make_params(testing::fused_test_shapes(), DType::Float64, Device::cpu(), 3);
  auto before = std::vector<Tensor>();
  for (const Tensor& p : params) before.push_back(p.detach().clone());
  optim::SGD sgd(params, optim::SGDOptions(0.1).momentum(0.9));
  testing::set_random_grads(params, 7);
  sgd.step();
  EXPECT_GT(testing::max_relative_difference(params, before), 1e-3);
}

TEST(FusedOptim, LearningRateChangesApply) {
  // A schedule sets lr between steps: the fused path must use the current value.
  Tensor p = Tensor::from_vector(std::vector<double>{1.0}, {1}, TensorOptions().requires_grad(true));
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  p.set_grad(Tensor::from_vector(std::vector<double>{1.0}, {1}));
  sgd.step();
  sgd.set_lr(0.5);
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 1.0 - 0.1 - 0.5);
}

TEST(FusedOptim, PrepareReplayNeedsACapturedStep) {
  // Counting a replay that cannot exist would put Adam's bias correction off by one.
  auto params = testing::make_params({{4}}, DType::Float64, Device::cpu(), 5);
  optim::Adam adam(params, optim::AdamOptions(1e-3));
  testing::set_random_grads(params, 9);
  adam.step();
  EXPECT_THROW(adam.prepare_replay(), Error);
  EXPECT_EQ(adam.param_step(0), 1);
  EXPECT_EQ(adam.step_count(), 1);
}

}  // namespace
}  // namespace sublet
