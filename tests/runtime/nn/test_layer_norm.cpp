// functional::layer_norm and nn::LayerNorm on the CPU: the forward against the formula computed
// with Tensor ops, gradients for input, weight and bias against float64 finite differences
// (with and without the affine parameters, one and two normalized dimensions), the errors, and
// output_dtype: the same bits and gradients as the norm followed by the cast.
#include "runtime/nn/layer_norm.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "runtime/autocast.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/gradcheck.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_throw_with;
using testing::random64;

double max_abs_difference(const Tensor& a, const Tensor& b) {
  return a.sub(b).to(DType::Float64).pow(2.0).max().sqrt().item<double>();
}

TEST(LayerNorm, ForwardMatchesTheFormula) {
  const Tensor x = random64({3, 4, 6}, 1).mul(3.0).add(5.0);  // rows far from zero mean
  const Tensor w = random64({6}, 2), b = random64({6}, 3);
  const Tensor mean = x.mean({2}, true);
  const Tensor var = x.sub(mean).pow(2.0).mean({2}, true);
  const Tensor expected = x.sub(mean).div(var.add(1e-5).sqrt()).mul(w).add(b);
  EXPECT_LE(max_abs_difference(F::layer_norm(x, {6}, w, b), expected), 1e-12);
  const Tensor x32 = x.to(DType::Float32);
  const Tensor y32 = F::layer_norm(x32, {6}, w.to(DType::Float32), b.to(DType::Float32));
  EXPECT_LE(max_abs_difference(y32.to(DType::Float64), expected), 1e-5);
}

TEST(LayerNorm, GradcheckInputWeightBias) {
  const Tensor x = random64({5, 7}, 4, true), w = random64({7}, 5, true), b = random64({7}, 6, true);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {7}, in[1], in[2]); }, {x, w, b}),
            1e-6);
  // No affine parameters; two normalized dimensions; only the weight requiring grad.
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {7}); }, {x}), 1e-6);
  const Tensor x3 = random64({2, 3, 4}, 7, true), w2 = random64({3, 4}, 8, true), b2 = random64({3, 4}, 9, true);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {3, 4}, in[1], in[2], 1e-3); },
                      {x3, w2, b2}),
            1e-6);
  const Tensor x_const = random64({4, 7}, 10);
  EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::layer_norm(x_const, {7}, in[0]); }, {w}), 1e-6);
}

TEST(LayerNorm, ModuleHasOnesAndZerosAndTheBiasSwitch) {
  nn::LayerNorm ln(nn::LayerNormOptions({4}));
  EXPECT_EQ(ln.weight.to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(ln.bias.to_vector<float>(), std::vector<float>(4, 0.0f));
  const Tensor x = testing::random32({2, 3, 4}, 11);
  EXPECT_LE(max_abs_difference(ln.forward(x), F::layer_norm(x, {4})), 0.0);
  nn::LayerNorm no_bias(nn::LayerNormOptions({4}).bias(false));
  EXPECT_TRUE(no_bias.weight.defined());
  EXPECT_FALSE(no_bias.bias.defined());
  nn::LayerNorm plain(nn::LayerNormOptions({4}).elementwise_affine(false));
  EXPECT_FALSE(plain.weight.defined());
}

// Leaves of x, w, b (float32), the output for them, and their gradients for the upstream g.
struct NormRun {
  Tensor out;
  std::vector<float> grads;
};

NormRun run_layer_norm(const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& fn, const Tensor& g) {
  Tensor x = random64({6, 10}, 20).mul(2.0).add(1.0).to(DType::Float32), w = random64({10}, 21).to(DType::Float32),
         b = random64({10}, 22).to(DType::Float32);
  for (Tensor* t : {&x, &w, &b}) t->requires_grad_(true);
  NormRun run{fn(x, w, b), {}};
  run.out.backward(g.to(run.out.dtype()));
  for (const Tensor& t : {x, w, b}) {
    const auto v = t.grad().to_vector<float>();
    run.grads.insert(run.grads.end(), v.begin(), v.end());
  }
  return run;
}

TEST(LayerNorm, OutputDtypeIsTheNormThenTheCast) {
  const Tensor g = random64({6, 10}, 23);
  for (DType low : {DType::BFloat16, DType::Float16}) {
    const NormRun fused = run_layer_norm(
        [low](const Tensor& x, const Tensor& w, const Tensor& b) { return F::layer_norm(x, {10}, w, b, 1e-5, low); }, g);
    const NormRun composed = run_layer_norm(
        [low](const Tensor& x, const Tensor& w, const Tensor& b) { return F::layer_norm(x, {10}, w, b).to(low); }, g);
    EXPECT_EQ(fused.out.dtype(), low);
    EXPECT_EQ(fused.out.to(DType::Float32).to_vector<float>(), composed.out.to(DType::Float32).to_vector<float>());
    EXPECT_EQ(fused.grads, composed.grads) << dtype_name(low);
  }
  // Its own dtype: the plain norm. Under autocast a 16-bit input is normalised in float32 first.
  const Tensor x = random64({3, 10}, 24).to(DType::Float32);
  EXPECT_LE(max_abs_difference(F::layer_norm(x, {10}, {}, {}, 1e-5, DType::Float32), F::layer_norm(x, {10})), 0.0);
  const Tensor x16 = x.to(DType::BFloat16);
  AutocastGuard autocast(DType::BFloat16);
  const Tensor y = F::layer_norm(x16, {10}, {}, {}, 1e-5, DType::BFloat16);
  EXPECT_EQ(y.dtype(), DType::BFloat16);
  EXPECT_LE(max_abs_difference(y, F::layer_norm(x16, {10}).to(DType::BFloat16)), 0.0);
  expect_throw_with([&] { F::layer_norm(x, {10}, {}, {}, 1e-5, DType::Int64); },
                    {"layer_norm", "output_dtype", "floating", "int64"});
}

TEST(LayerNorm, ModuleForwardAsIsForwardThenTheCast) {
  nn::LayerNorm ln(nn::LayerNormOptions({4}));
  {
    NoGradGuard no_grad;
    ln.weight.copy_(random64({4}, 25));
    ln.bias.copy_(random64({4}, 26));
  }
  const Tensor x = testing::random32({2, 3, 4}, 27);
  const Tensor y = ln.forward_as(x, DType::Float16);
  EXPECT_EQ(y.dtype(), DType::Float16);
  EXPECT_LE(max_abs_difference(y, ln.forward(x).to(DType::Float16)), 0.0);
  int calls = 0;
  ln.register_forward_pre_hook([&calls](nn::Module&, const Tensor&) { ++calls; });
  ln.forward_as(x, DType::Float32);
  EXPECT_EQ(calls, 1);  // the module's hooks run
}

TEST(LayerNorm, ShapeErrorsNameTheShapes) {
  const Tensor x = random64({2, 5}, 12);
  expect_throw_with([&] { F::layer_norm(x, {4}); }, {"layer_norm", "normalized_shape [4]", "[2, 5]"});
  expect_throw_with([&] { F::layer_norm(x, {}); }, {"layer_norm", "non-empty"});
  expect_throw_with([&] { F::layer_norm(x, {5}, random64({4}, 13)); }, {"layer_norm", "weight", "[5]", "[4]"});
  expect_throw_with([&] { F::layer_norm(x, {5}, {}, random64({5, 1}, 14)); }, {"layer_norm", "bias"});
}

}  // namespace
}  // namespace sublet
