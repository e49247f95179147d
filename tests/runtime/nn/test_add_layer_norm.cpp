// functional::add_layer_norm on the CPU (the two ops: x + h, then layer_norm): the values of the
// composition, gradients of residual, branch, weight and bias against float64 finite
// differences with both outputs used, the broadcasting and autocast cases, and the errors.
#include "runtime/nn/add_layer_norm.h"

#include <gtest/gtest.h>

#include "runtime/autocast.h"
#include "runtime/gradcheck.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_throw_with;
using testing::random64;

double max_abs_difference(const Tensor& a, const Tensor& b) {
  return a.to(DType::Float64).sub(b.to(DType::Float64)).pow(2.0).max().sqrt().item<double>();
}

TEST(AddLayerNorm, IsTheAddThenTheNorm) {
  const Tensor x = random64({4, 9}, 1).mul(3.0).add(2.0), h = random64({4, 9}, 2);
  const Tensor w = random64({9}, 3), b = random64({9}, 4);
  const auto [sum, normed] = F::add_layer_norm(x, h, {9}, w, b);
  EXPECT_LE(max_abs_difference(sum, x + h), 0.0);
  EXPECT_LE(max_abs_difference(normed, F::layer_norm(x + h, {9}, w, b)), 0.0);
  // A branch that broadcasts takes the two ops.
  const Tensor row = random64({9}, 5);
  const auto broadcast = F::add_layer_norm(x, row, {9});
  EXPECT_LE(max_abs_difference(broadcast.normalized, F::layer_norm(x + row, {9})), 0.0);
}

TEST(AddLayerNorm, GradcheckBothOutputs) {
  const Tensor x = random64({5, 7}, 6, true), h = random64({5, 7}, 7, true);
  const Tensor w = random64({7}, 8, true), b = random64({7}, 9, true);
  // Both outputs carry gradient: the sum's (residual path) and the norm's.
  const auto fn = [](const std::vector<Tensor>& in) {
    const auto [sum, normed] = F::add_layer_norm(in[0], in[1], {7}, in[2], in[3]);
    return sum.mul(0.7).add(normed);
  };
  EXPECT_LE(gradcheck(fn, {x, h, w, b}), 1e-6);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return F::add_layer_norm(in[0], in[1], {7}).normalized; },
                      {x, h}),
            1e-6);
}

TEST(AddLayerNorm, UnderAutocastTheSumStaysFloat32AndTheOutputIsLowered) {
  const Tensor x = random64({3, 8}, 10).to(DType::Float32);
  const Tensor h = random64({3, 8}, 11).to(DType::BFloat16);
  AutocastGuard autocast(DType::BFloat16);
  const auto [sum, normed] = F::add_layer_norm(x, h, {8}, {}, {}, 1e-5, DType::BFloat16);
  EXPECT_EQ(sum.dtype(), DType::Float32);
  EXPECT_EQ(normed.dtype(), DType::BFloat16);
  EXPECT_LE(max_abs_difference(normed, F::layer_norm(x + h, {8}).to(DType::BFloat16)), 0.0);
}

TEST(AddLayerNorm, ErrorsNameTheOp) {
  const Tensor x = random64({2, 5}, 12);
  expect_throw_with([&] { F::add_layer_norm(Tensor(), x, {5}); }, {"add_layer_norm"});
  expect_throw_with([&] { F::add_layer_norm(x, x, {5}, {}, {}, 1e-5, DType::Int64); },
                    {"add_layer_norm", "output_dtype", "int64"});
  expect_throw_with([&] { F::add_layer_norm(x, x, {4}); }, {"layer_norm", "normalized_shape [4]"});
}

}  // namespace
}  // namespace sublet
