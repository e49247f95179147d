// Autocast (runtime/autocast.h) on the CPU: the policy checks shared with the GPU suite
// (tests/runtime/autocast_policy_checks.h) for both 16-bit types, the guard's argument check,
// the backward pass's dtypes, and a few training steps whose losses follow the float32 run's.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/checkpoint.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/flatten.h"
#include "runtime/optim/sgd.h"
#include "tests/runtime/autocast_policy_checks.h"

namespace sublet {
namespace {

using namespace sublet::testing;

TEST(Autocast, OpsRunInThePolicysDtypeBFloat16) { check_op_dtypes(Device::cpu(), DType::BFloat16); }
TEST(Autocast, OpsRunInThePolicysDtypeFloat16) { check_op_dtypes(Device::cpu(), DType::Float16); }
// Relative L2 error of the gradients: a few bfloat16 roundings (2^-8 each) of the operands.
TEST(Autocast, MasterWeightsAndTheirGradientsStayFloat32BFloat16) {
  check_master_weights(Device::cpu(), DType::BFloat16, 3e-2);
}
TEST(Autocast, MasterWeightsAndTheirGradientsStayFloat32Float16) {
  check_master_weights(Device::cpu(), DType::Float16, 4e-3);
}
TEST(Autocast, GuardsNestAndRestore) { check_nesting(Device::cpu()); }
TEST(Autocast, AParameterIsCastOncePerOutermostGuardBFloat16) {
  check_weight_cast_cache(Device::cpu(), DType::BFloat16);
}
TEST(Autocast, AParameterIsCastOncePerOutermostGuardFloat16) {
  check_weight_cast_cache(Device::cpu(), DType::Float16);
}

TEST(Autocast, LowerDataSharesTheCastCacheBFloat16) {
  check_lower_data_shares_the_cast_cache(Device::cpu(), DType::BFloat16);
}
TEST(Autocast, LowerDataSharesTheCastCacheFloat16) {
  check_lower_data_shares_the_cast_cache(Device::cpu(), DType::Float16);
}

TEST(Autocast, AGuardOfAnotherDtypeIsAValueErrorNamingWhatWasExpected) {
  try {
    AutocastGuard guard(DType::Float32);
    FAIL() << "a float32 autocast guard was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("bfloat16 or float16, got float32"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(amp::autocast_is_enabled()) << "a refused guard leaves the state as it was";
}

// Backward inside a guard runs with autocast off: the gradient of a 16-bit activation that is
// summed back over a broadcast (sum_to) stays 16-bit instead of being cast up by the policy.
TEST(Autocast, BackwardInsideAGuardKeepsTheForwardsDtypes) {
  const Tensor x = random_on(Device::cpu(), {4, 6}, 41), w = random_on(Device::cpu(), {6, 3}, 42, true);
  Tensor bias = random_on(Device::cpu(), {3}, 43).to(DType::BFloat16).requires_grad_(true);  // a 16-bit leaf
  AutocastGuard autocast(DType::BFloat16);
  const Tensor y = x.matmul(w) + bias;  // bfloat16 + bfloat16, bias broadcast
  y.sum().backward();
  EXPECT_TRUE(amp::autocast_is_enabled()) << "backward restores the guard's state";
  EXPECT_EQ(bias.grad().dtype(), DType::BFloat16) << "summed back over the broadcast in its own dtype";
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
}

// The same graph's backward run inside and outside the guard gives the same gradients. Here
// the conv output is the broadcast operand of an add, so its gradient is summed back (sum_to):
// were the policy on in backward, that sum would come back float32 and the bfloat16 conv
// backward would read it as 16-bit.
TEST(Autocast, BackwardInsideAGuardEqualsBackwardOutside) {
  const Tensor x = random_on(Device::cpu(), {2, 3, 5, 5}, 44), t = random_on(Device::cpu(), {2, 4, 5, 5}, 45);
  const auto weight_grad = [&](bool backward_inside) {
    Tensor w = random_on(Device::cpu(), {4, 3, 5, 5}, 46, true);
    Tensor loss;
    {
      AutocastGuard autocast(DType::BFloat16);
      const Tensor h = nn::functional::conv2d(x, w);  // [2, 4, 1, 1], bfloat16
      const Tensor y = h + amp::to_lower(t);
      loss = (y * y).sum();
      if (backward_inside) loss.backward();
    }
    if (!backward_inside) loss.backward();
    return w.grad().to_vector<float>();
  };
  const std::vector<float> inside = weight_grad(true), outside = weight_grad(false);
  ASSERT_EQ(inside.size(), outside.size());
  for (std::size_t i = 0; i < inside.size(); ++i) ASSERT_TRUE(inside[i] == outside[i]) << i << ": " << inside[i] << " vs " << outside[i];
}

// A checkpointed block recomputes its forward in backward under the autocast state of its
// forward (the engine has switched autocast off by then): the gradients are those of the
// block run plainly under the same guard.
TEST(Autocast, CheckpointRecomputesUnderTheForwardsAutocastState) {
  Tensor x = random_on(Device::cpu(), {2, 3, 6, 6}, 61, true);
  const auto grads = [&](bool recompute) {
    Generator init(62);
    auto block = std::make_shared<nn::Sequential>();
    block->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(3, 4, 3).padding(1), init));
    block->push_back(std::make_shared<nn::ReLU>());
    block->push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(4, 2, 3).padding(1), init));
    Tensor loss;
    {
      AutocastGuard autocast(DType::BFloat16);
      const Tensor y = recompute ? nn::checkpoint(block, x) : (*block)(x);
      EXPECT_EQ(y.dtype(), DType::BFloat16);
      loss = (y.to(DType::Float32) * y.to(DType::Float32)).sum();
    }
    x.set_grad({});
    loss.backward();
    std::vector<float> out = x.grad().to_vector<float>();
    for (const Tensor& p : block->parameters()) {
      EXPECT_EQ(p.grad().dtype(), DType::Float32);
      const std::vector<float> g = p.grad().to_vector<float>();
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  };
  const std::vector<float> plain = grads(false), recomputed = grads(true);
  ASSERT_EQ(plain.size(), recomputed.size());
  for (std::size_t i = 0; i < plain.size(); ++i)
    ASSERT_TRUE(plain[i] == recomputed[i]) << i << ": " << recomputed[i] << " vs " << plain[i];
}

// A parameter changed in place within the guard (no backward in between) is cast again.
TEST(Autocast, AParameterChangedInPlaceIsCastAgain) {
  const Tensor x = random_on(Device::cpu(), {3, 5}, 71);
  Tensor w = random_on(Device::cpu(), {5, 2}, 72, true);
  AutocastGuard autocast(DType::BFloat16);
  const std::vector<float> before = x.matmul(w).to_vector<float>();
  {
    NoGradGuard no_grad;
    w.mul_(2.0);
  }
  const std::vector<float> after = x.matmul(w).to_vector<float>();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i)
    EXPECT_TRUE(after[i] == 2 * before[i]) << i << ": " << after[i] << " vs 2 * " << before[i];
}

// The promotion of a 16-bit/float32 mix holds outside autocast too, with each operand's
// gradient in its own dtype.
TEST(Autocast, MixedSixteenBitAndFloat32PromotesAndGradientsKeepTheirDtypes) {
  Tensor a = random_on(Device::cpu(), {3, 4}, 51).to(DType::BFloat16).requires_grad_(true);
  Tensor b = random_on(Device::cpu(), {4}, 52, true);
  const Tensor y = a * b;
  EXPECT_EQ(y.dtype(), DType::Float32);
  EXPECT_EQ((a - b).dtype(), DType::Float32);
  EXPECT_EQ(a.maximum(b).dtype(), DType::Float32);
  y.sum().backward();
  EXPECT_EQ(a.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(b.grad().dtype(), DType::Float32);
  // Other mixes still throw.
  EXPECT_THROW(b + b.to(DType::Float64), DTypeError);
}

// A few SGD steps of a small conv net: under bfloat16/float16 autocast the losses follow the
// float32 run's from the same initial weights (each step's loss within the stated tolerance).
std::vector<double> train_losses(bool autocast, DType low, bool one_guard_for_the_loop = false) {
  Generator init(7);
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(1, 4, 3).padding(1), init));
  model.push_back(std::make_shared<nn::ReLU>());
  model.push_back(std::make_shared<nn::Conv2d>(nn::Conv2dOptions(4, 4, 3).stride(2).padding(1), init));
  model.push_back(std::make_shared<nn::ReLU>());
  model.push_back(std::make_shared<nn::Flatten>());
  model.push_back(std::make_shared<nn::Linear>(nn::LinearOptions(4 * 4 * 4, 5), init));
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Generator data(8);
  const Tensor x = randn({16, 1, 8, 8}, data);
  std::vector<std::int64_t> label_values;
  for (int i = 0; i < 16; ++i) label_values.push_back(i % 5);
  const Tensor labels = Tensor::from_vector(label_values, {16});
  std::vector<double> losses;
  std::optional<AutocastGuard> loop_guard;
  if (one_guard_for_the_loop) loop_guard.emplace(low, autocast);
  for (int step = 0; step < 5; ++step) {
    sgd.zero_grad();
    Tensor loss;
    {
      AutocastGuard guard(low, autocast);
      loss = nn::functional::cross_entropy(model(x), labels);
    }
    EXPECT_EQ(loss.dtype(), DType::Float32);
    loss.backward();
    for (const Tensor& p : model.parameters()) {
      EXPECT_EQ(p.dtype(), DType::Float32);
      EXPECT_EQ(p.grad().dtype(), DType::Float32);
    }
    sgd.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

void expect_losses_follow_float32(DType low, double rtol) {
  const std::vector<double> reference = train_losses(false, low), mixed = train_losses(true, low);
  ASSERT_EQ(mixed.size(), reference.size());
  EXPECT_TRUE(reference.back() < reference.front()) << "the float32 run learns";
  EXPECT_NE(mixed, reference) << "the autocast run computed in float32";
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double err = std::abs(mixed[i] - reference[i]);
    EXPECT_TRUE(err <= rtol * std::abs(reference[i])) << "step " << i << ": " << mixed[i] << " vs float32 " << reference[i];
  }
}

// One guard around the whole loop (backward and optimizer step inside it): each step casts the
// updated parameters again, so the losses are those of a guard per step, bit for bit.
TEST(Autocast, AGuardAroundTheWholeLoopRecastsUpdatedParameters) {
  const std::vector<double> per_step = train_losses(true, DType::BFloat16);
  const std::vector<double> whole_loop = train_losses(true, DType::BFloat16, /*one_guard_for_the_loop=*/true);
  EXPECT_EQ(whole_loop, per_step);
}

// The bounds sit a few times above what the 16-bit runs differ by; the five float32 losses fall
// by 5% in all, so a step lost or doubled is far outside them.
TEST(Autocast, TrainingStepsFollowTheFloat32LossBFloat16) { expect_losses_follow_float32(DType::BFloat16, 1e-3); }
TEST(Autocast, TrainingStepsFollowTheFloat32LossFloat16) { expect_losses_follow_float32(DType::Float16, 2e-4); }

}  // namespace
}  // namespace sublet
