// functional::layer_norm and nn::LayerNorm on the CPU: the forward against the formula computed
// with Tensor ops, gradients for input, weight and bias against float64 finite differences
// (with and without the affine parameters, one and two normalized dimensions), and the errors.
#include "runtime/nn/layer_norm.h"

#include <gtest/gtest.h>

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

TEST(LayerNorm, ShapeErrorsNameTheShapes) {
  const Tensor x = random64({2, 5}, 12);
  expect_throw_with([&] { F::layer_norm(x, {4}); }, {"layer_norm", "normalized_shape [4]", "[2, 5]"});
  expect_throw_with([&] { F::layer_norm(x, {}); }, {"layer_norm", "non-empty"});
  expect_throw_with([&] { F::layer_norm(x, {5}, random64({4}, 13)); }, {"layer_norm", "weight", "[5]", "[4]"});
  expect_throw_with([&] { F::layer_norm(x, {5}, {}, random64({5, 1}, 14)); }, {"layer_norm", "bias"});
}

}  // namespace
}  // namespace sublet
