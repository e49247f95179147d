// amp::StepRecipe, the step `--precision` runs (runtime/amp/step_recipe.h), on the CPU:
//  - fp32 is the plain step: no autocast, no scaler, the optimizer steps;
//  - bf16 runs the forward under autocast (a matmul comes out bfloat16) and has no scaler;
//  - fp16 scales the loss for backward (gradients are scale x the true ones before the step),
//    and a step with an infinite gradient changes nothing and halves the scale.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/amp/step_recipe.h"
#include "runtime/autocast.h"
#include "runtime/factories.h"
#include "runtime/optim/sgd.h"

namespace sublet::amp {
namespace {

struct Toy {
  Tensor w = full({2, 2}, 0.5).requires_grad_();
  optim::SGD sgd{{w}, optim::SGDOptions(0.1)};
  Tensor x = full({3, 2}, 1.0);
  Tensor loss() const { return x.matmul(w).sum(); }  // d loss / d w = 3 everywhere
};

TEST(StepRecipe, Fp32IsThePlainStep) {
  StepRecipe recipe(Precision::Fp32);
  EXPECT_EQ(recipe.scaler(), nullptr);
  Toy toy;
  const Tensor loss = recipe.forward([&] {
    EXPECT_FALSE(autocast_is_enabled());
    return toy.loss();
  });
  recipe.backward(loss);
  EXPECT_DOUBLE_EQ(toy.w.grad().to_vector<double>()[0], 3.0);
  EXPECT_EQ(recipe.step(toy.sgd), optim::StepOutcome::Stepped);
  EXPECT_NEAR(toy.w.to_vector<double>()[0], 0.5 - 0.1 * 3.0, 1e-7);
}

TEST(StepRecipe, Bf16RunsTheForwardUnderAutocastWithoutAScaler) {
  StepRecipe recipe(Precision::Bf16);
  EXPECT_EQ(recipe.scaler(), nullptr);
  Toy toy;
  const Tensor product = recipe.forward([&] { return toy.x.matmul(toy.w); });
  EXPECT_EQ(product.dtype(), DType::BFloat16);
  EXPECT_FALSE(autocast_is_enabled()) << "the guard ends with the forward";
  recipe.backward(recipe.forward([&] { return toy.loss(); }));
  EXPECT_EQ(toy.w.grad().dtype(), DType::Float32) << "master weights keep float32 gradients";
}

TEST(StepRecipe, Fp16ScalesTheLossAndSkipsAnInfiniteStep) {
  StepRecipe recipe(Precision::Fp16, Device::cpu(), GradScalerOptions{.init_scale = 1024.0});
  ASSERT_NE(recipe.scaler(), nullptr);
  Toy toy;
  const Tensor loss = recipe.forward([&] { return toy.loss(); });
  EXPECT_EQ(loss.dtype(), DType::Float32) << "sum runs in float32 under autocast";
  recipe.backward(loss);
  EXPECT_DOUBLE_EQ(toy.w.grad().to_vector<double>()[0], 3.0 * 1024.0) << "backward of the scaled loss";
  recipe.step(toy.sgd);  // unscales inside the update: w = 0.5 - 0.1 * 3
  EXPECT_NEAR(toy.w.to_vector<double>()[0], 0.2, 1e-6);
  EXPECT_DOUBLE_EQ(recipe.scaler()->current_scale(), 1024.0);

  toy.sgd.zero_grad();
  const std::vector<double> before = toy.w.to_vector<double>();
  toy.w.set_grad(full({2, 2}, std::numeric_limits<double>::infinity()));
  recipe.step(toy.sgd);
  EXPECT_EQ(toy.w.to_vector<double>(), before) << "an infinite gradient changes nothing";
  EXPECT_DOUBLE_EQ(recipe.scaler()->current_scale(), 512.0) << "and halves the scale";
}

}  // namespace
}  // namespace sublet::amp
