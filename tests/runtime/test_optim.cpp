// Optimizers and learning-rate schedules against hand-computed updates.
#include <cmath>

#include "core/errors.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/lr_scheduler.h"
#include "runtime/optim/sgd.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

Tensor param(std::vector<double> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return Tensor::from_vector(values, {n}, TensorOptions().requires_grad(true));
}

void set_grad(Tensor& p, std::vector<double> values) {
  p.set_grad(Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}));
}

TEST(Optim, PlainSgd) {
  Tensor p = param({1.0, 2.0});
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  set_grad(p, {0.5, -1.0});
  sgd.step();
  const auto v = p.to_vector<double>();
  EXPECT_DOUBLE_EQ(v[0], 0.95);
  EXPECT_DOUBLE_EQ(v[1], 2.1);
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  sgd.step();  // no gradient: unchanged
  EXPECT_DOUBLE_EQ(p.to_vector<double>()[0], 0.95);
}

TEST(Optim, BackwardAndStepOnTheCpuIsBackwardThenStep) {
  // Nothing to overlap on the CPU: backward, then the step, as two calls would.
  Tensor p = param({1.0, 2.0});
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  bool backward_ran = false;
  const std::size_t during = sgd.backward_and_step([&] {
    (p * p).sum().backward();  // gradient 2p = {2, 4}
    backward_ran = true;
  });
  EXPECT_TRUE(backward_ran);
  EXPECT_EQ(during, 0u);
  const auto v = p.to_vector<double>();
  EXPECT_DOUBLE_EQ(v[0], 1.0 - 0.1 * 2.0);
  EXPECT_DOUBLE_EQ(v[1], 2.0 - 0.1 * 4.0);
  EXPECT_EQ(sgd.step_count(), 1);
}

TEST(Optim, SgdMomentumDampeningWeightDecay) {
  const double lr = 0.1, mu = 0.9, damp = 0.2, wd = 0.01;
  Tensor p = param({1.0});
  optim::SGD sgd({p}, optim::SGDOptions(lr).momentum(mu).dampening(damp).weight_decay(wd));
  double x = 1.0, buf = 0.0;
  const double grads[] = {0.5, -0.3, 0.8};
  for (int step = 0; step < 3; ++step) {
    set_grad(p, {grads[step]});
    sgd.step();
    const double g = grads[step] + wd * x;
    buf = step == 0 ? g : mu * buf + (1 - damp) * g;
    x -= lr * buf;
    EXPECT_NEAR(p.item<double>(), x, 1e-15) << "step " << step;
  }
  // step 0 by hand: g = 0.5 + 0.01 = 0.51, buf = 0.51, x = 1 - 0.051 = 0.949
  EXPECT_EQ(sgd.momentum_buffer(0).storage().category(), memory::BlockCategory::OptimizerState);
}

TEST(Optim, SgdNesterov) {
  const double lr = 0.5, mu = 0.9;
  Tensor p = param({2.0});
  optim::SGD sgd({p}, optim::SGDOptions(lr).momentum(mu).nesterov(true));
  set_grad(p, {1.0});
  sgd.step();
  EXPECT_DOUBLE_EQ(p.item<double>(), 2.0 - lr * (1.0 + mu * 1.0));  // buf = 1, g = 1 + 0.9
  set_grad(p, {-1.0});
  sgd.step();
  const double buf = mu * 1.0 - 1.0;  // -0.1
  EXPECT_NEAR(p.item<double>(), 2.0 - 0.95 - lr * (-1.0 + mu * buf), 1e-15);
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)), ValueError);
}

// Adam on one element, written out.
struct AdamReference {
  double lr, b1, b2, eps, wd;
  bool decoupled;
  double x, m = 0, v = 0;
  int t = 0;
  void step(double grad) {
    ++t;
    double g = grad;
    if (wd != 0) {
      if (decoupled) x *= 1 - lr * wd;
      else g += wd * x;
    }
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double m_hat = m / (1 - std::pow(b1, t));
    const double v_hat = v / (1 - std::pow(b2, t));
    x -= lr * m_hat / (std::sqrt(v_hat) + eps);
  }
};

TEST(Optim, AdamFirstStepIsLrTimesSign) {
  Tensor p = param({1.0, -1.0});
  optim::Adam adam({p}, optim::AdamOptions(0.1));
  set_grad(p, {0.5, -2.0});
  adam.step();
  // m_hat = g, v_hat = g^2: the step is lr * g / (|g| + eps) = +-0.1 (up to eps)
  EXPECT_NEAR(p.to_vector<double>()[0], 0.9, 1e-8);
  EXPECT_NEAR(p.to_vector<double>()[1], -0.9, 1e-8);
  EXPECT_EQ(adam.exp_avg(0).storage().category(), memory::BlockCategory::OptimizerState);
  EXPECT_EQ(adam.exp_avg_sq(0).storage().category(), memory::BlockCategory::OptimizerState);
}

TEST(Optim, AdamAndAdamWMatchReference) {
  const double grads[] = {0.5, -0.3, 0.8, 0.1};
  for (bool decoupled : {false, true}) {
    Tensor p = param({1.5});
    const auto options = optim::AdamOptions(0.01).betas(0.8, 0.95).eps(1e-6).weight_decay(0.1);
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled) opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, options);
    else opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, options);
    AdamReference ref{0.01, 0.8, 0.95, 1e-6, 0.1, decoupled, 1.5};
    for (double g : grads) {
      set_grad(p, {g});
      opt->step();
      ref.step(g);
      EXPECT_NEAR(p.item<double>(), ref.x, 1e-14) << (decoupled ? "AdamW" : "Adam");
    }
  }
}

// nanoGPT's AdamW: 2-D weights decayed, the rest not, through parameter groups; each parameter
// follows the reference with its group's decay, with the fused update and without.
TEST(Optim, AdamWParameterGroupsDecayOnlyTheirOwn) {
  const double grads[][2] = {{0.5, -0.3}, {0.8, 0.1}, {-0.2, 0.4}};
  for (bool fused : {true, false}) {
    Tensor decayed = param({1.5}), plain = param({-0.7});
    const auto options = optim::AdamOptions(0.01).betas(0.9, 0.95).eps(1e-6).weight_decay(0.5).fused(fused);
    optim::AdamW opt({{{decayed}, 0.1}, {{plain}, 0.0}}, options);
    EXPECT_EQ(opt.weight_decay(0), 0.1);
    EXPECT_EQ(opt.weight_decay(1), 0.0);
    AdamReference ref_decayed{0.01, 0.9, 0.95, 1e-6, 0.1, true, 1.5}, ref_plain{0.01, 0.9, 0.95, 1e-6, 0.0, true, -0.7};
    for (const auto& g : grads) {
      set_grad(decayed, {g[0]});
      set_grad(plain, {g[1]});
      opt.step();
      ref_decayed.step(g[0]);
      ref_plain.step(g[1]);
      EXPECT_NEAR(decayed.item<double>(), ref_decayed.x, 1e-14) << (fused ? "fused" : "per tensor");
      EXPECT_NEAR(plain.item<double>(), ref_plain.x, 1e-14) << (fused ? "fused" : "per tensor");
    }
    EXPECT_EQ(opt.step_count(), 3);
  }
  // A group without its own decay takes the options'; a negative one is an error.
  Tensor p = param({1.0});
  optim::AdamW defaulted({optim::AdamParamGroup{{p}, std::nullopt}}, optim::AdamOptions(0.01).weight_decay(0.3));
  EXPECT_EQ(defaulted.weight_decay(0), 0.3);
  EXPECT_THROW(optim::AdamW({{{p}, -0.1}}, optim::AdamOptions(0.01)), ValueError);
}

TEST(Optim, StateDictResumesExactly) {
  // Three steps, save, restore into a fresh optimizer over copies of the parameters: the next
  // steps must match the uninterrupted run bit for bit (moments and per-parameter step counts).
  Tensor a = param({1.0, -2.0}), unused = param({5.0});
  optim::AdamW adam({a, unused}, optim::AdamOptions(0.05).weight_decay(0.1));
  for (double g : {0.3, -0.7, 1.1}) {
    set_grad(a, {g, 2 * g});
    adam.step();
  }
  Tensor a2 = a.detach().clone().requires_grad_(true), unused2 = unused.detach().clone().requires_grad_(true);
  // Hyperparameters come from the constructor; the learning rate (often scheduled) from the state.
  optim::AdamW resumed({a2, unused2}, optim::AdamOptions(0.0).weight_decay(0.1));
  resumed.load_state_dict(adam.state_dict());
  EXPECT_EQ(resumed.lr(), 0.05);
  EXPECT_EQ(resumed.step_count(), 3);
  EXPECT_EQ(resumed.param_step(0), 3);
  EXPECT_EQ(resumed.param_step(1), 0);
  EXPECT_FALSE(resumed.exp_avg(1).defined());
  for (double g : {0.2, -0.4}) {
    set_grad(a, {g, g});
    set_grad(a2, {g, g});
    adam.step();
    resumed.step();
  }
  EXPECT_EQ(a2.to_vector<double>(), a.to_vector<double>());
  EXPECT_FALSE(resumed.exp_avg(0).storage().is_same(adam.exp_avg(0).storage()));  // copied, not shared
  auto bad = adam.state_dict();
  bad.emplace_back("7.exp_avg", zeros({2}, DType::Float64));
  testing::expect_throw_with([&] { resumed.load_state_dict(bad); }, {"7.exp_avg"});
  auto wrong_shape = adam.state_dict();
  for (auto& [name, t] : wrong_shape) if (name == "0.exp_avg") t = zeros({3}, DType::Float64);
  testing::expect_throw_with([&] { resumed.load_state_dict(wrong_shape); }, {"0.exp_avg", "[3]", "[2]"});
}

TEST(Optim, RejectsBadParametersAndOptions) {
  EXPECT_THROW(optim::SGD({ones({2})}, optim::SGDOptions(0.1)), ValueError);  // does not require grad
  Tensor p = param({1.0});
  EXPECT_THROW(optim::Adam({p}, optim::AdamOptions(0.1).betas(1.0, 0.9)), ValueError);
  EXPECT_THROW(optim::SGD({p}, optim::SGDOptions(-1.0)), ValueError);
}

TEST(Optim, SgdTrainsALinearRegression) {
  Generator g(3);
  const Tensor x = randn({64, 3}, g, DType::Float64);
  const Tensor true_w = Tensor::from_vector(std::vector<double>{1.5, -2.0, 0.5}, {3, 1});
  const Tensor y = x.matmul(true_w) + 0.25;
  Tensor w = zeros({3, 1}, TensorOptions().dtype(DType::Float64).requires_grad(true));
  Tensor b = zeros({1}, TensorOptions().dtype(DType::Float64).requires_grad(true));
  optim::SGD sgd({w, b}, optim::SGDOptions(0.1).momentum(0.9));
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    sgd.zero_grad();
    Tensor loss = (x.matmul(w) + b - y).pow(2.0).mean();
    loss.backward();
    sgd.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 1e-6 * first);
  EXPECT_NEAR(b.item<double>(), 0.25, 1e-3);
  EXPECT_NEAR(w.to_vector<double>()[1], -2.0, 1e-3);
}

TEST(Schedules, StepCosineAndWarmup) {
  Tensor p = param({1.0});
  optim::SGD sgd({p}, optim::SGDOptions(1.0));
  optim::StepLR step_lr(sgd, 2, 0.5);
  std::vector<double> seen;
  for (int e = 0; e < 5; ++e) {
    step_lr.step();
    seen.push_back(sgd.lr());
  }
  EXPECT_EQ(seen, (std::vector<double>{1.0, 0.5, 0.5, 0.25, 0.25}));

  optim::SGD sgd2({p}, optim::SGDOptions(0.1));
  optim::CosineAnnealingLR cosine(sgd2, 10, 0.001);
  EXPECT_DOUBLE_EQ(cosine.lr_at(0), 0.1);
  EXPECT_NEAR(cosine.lr_at(5), 0.001 + 0.099 / 2, 1e-15);
  EXPECT_NEAR(cosine.lr_at(10), 0.001, 1e-15);
  EXPECT_NEAR(cosine.lr_at(20), 0.001, 1e-15);

  optim::SGD sgd3({p}, optim::SGDOptions(0.2));
  optim::LinearWarmupLR warmup(sgd3, 4, 0.25, std::make_unique<optim::CosineAnnealingLR>(sgd3, 8));
  EXPECT_DOUBLE_EQ(sgd3.lr(), 0.05);  // start_factor * base at once
  std::vector<double> lrs;
  for (int e = 0; e < 8; ++e) {
    warmup.step();
    lrs.push_back(sgd3.lr());
  }
  EXPECT_NEAR(lrs[0], 0.2 * (0.25 + 0.75 * 0.25), 1e-15);  // epoch 1
  EXPECT_NEAR(lrs[2], 0.2 * (0.25 + 0.75 * 0.75), 1e-15);  // epoch 3
  EXPECT_NEAR(lrs[3], 0.2, 1e-15);                          // epoch 4: cosine starts at base
  EXPECT_NEAR(lrs[7], 0.2 * (1 + std::cos(std::acos(-1.0) * 4 / 8)) / 2, 1e-15);  // epoch 8
}

// nanoGPT's schedule (train.py get_lr: warmup to lr over warmup_iters, cosine decay to min_lr at
// lr_decay_iters, min_lr after) is LinearWarmupLR with start_factor 1 / (warmup + 1) followed by
// CosineAnnealingLR over the decay steps: equal at every iteration.
TEST(Schedules, WarmupThenCosineIsNanoGptsSchedule) {
  const double lr = 6e-4, min_lr = 6e-5;
  const std::int64_t warmup = 10, decay_iters = 60;
  auto nanogpt = [&](std::int64_t it) {
    if (it < warmup) return lr * static_cast<double>(it + 1) / static_cast<double>(warmup + 1);
    if (it > decay_iters) return min_lr;
    const double ratio = static_cast<double>(it - warmup) / static_cast<double>(decay_iters - warmup);
    return min_lr + 0.5 * (1.0 + std::cos(std::acos(-1.0) * ratio)) * (lr - min_lr);
  };
  Tensor p = param({1.0});
  optim::AdamW opt({p}, optim::AdamOptions(lr));
  optim::LinearWarmupLR schedule(opt, warmup, 1.0 / static_cast<double>(warmup + 1),
                                 std::make_unique<optim::CosineAnnealingLR>(opt, decay_iters - warmup, min_lr));
  for (std::int64_t it = 0; it < 80; ++it) {
    EXPECT_NEAR(opt.lr(), nanogpt(it), 1e-18) << "iteration " << it;
    schedule.step();
  }
}

}  // namespace
}  // namespace sublet
