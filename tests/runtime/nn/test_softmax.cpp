// functional::softmax and log_softmax on the CPU: rows that sum to one, agreement with each
// other (log of one is the other), stability for large logits, any dimension, gradients against
// float64 finite differences.
#include <gtest/gtest.h>

#include "runtime/factories.h"
#include "runtime/gradcheck.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_throw_with;
using testing::random64;

double max_abs_difference(const Tensor& a, const Tensor& b) {
  return a.sub(b).to(DType::Float64).pow(2.0).max().sqrt().item<double>();
}

TEST(Softmax, RowsSumToOneAndAgreeWithLogSoftmax) {
  const Tensor x = random64({3, 4, 9}, 1).mul(4.0);
  const Tensor p = F::softmax(x, -1);
  EXPECT_LE(max_abs_difference(p.sum({2}), ones({3, 4}, DType::Float64)), 1e-14);
  EXPECT_LE(max_abs_difference(p.log(), F::log_softmax(x, -1)), 1e-13);
  // Large logits: shifted by the row maximum, no overflow.
  const Tensor big = x.add(1000.0);
  EXPECT_LE(max_abs_difference(F::softmax(big, -1), p), 1e-13);
}

TEST(Softmax, AnyDimensionMatchesTransposingByHand) {
  const Tensor x = random64({3, 5, 4}, 2);
  for (std::int64_t dim : {0, 1, -2}) {
    const std::int64_t d = dim < 0 ? dim + 3 : dim;
    const Tensor by_hand = F::softmax(x.transpose(d, 2), -1).transpose(d, 2);
    EXPECT_LE(max_abs_difference(F::softmax(x, dim), by_hand), 0.0) << "dim " << dim;
    EXPECT_LE(max_abs_difference(F::softmax(x, dim).sum({d}), ones(dim == 0 ? Shape{5, 4} : Shape{3, 4}, DType::Float64)),
              1e-14);
  }
}

TEST(Softmax, GradcheckOverTheLastAndAnInnerDimension) {
  const Tensor x = random64({2, 3, 5}, 3, true);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return F::softmax(in[0], -1); }, {x}), 1e-6);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return F::softmax(in[0], 1); }, {x}), 1e-6);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return F::log_softmax(in[0], 0); }, {x}), 1e-6);
}

TEST(Softmax, ErrorsNameTheOp) {
  expect_throw_with([] { F::softmax(random64({2, 3}, 4), 2); }, {"softmax", "2"});
  expect_throw_with([] { F::softmax(Tensor::from_vector<std::int64_t>({1, 2}, {2}), 0); }, {"softmax"});
}

}  // namespace
}  // namespace sublet
