// functional::cross_entropy's GPT forms on the CPU: logits [B, T, V] with targets [B, T], the
// ignore index (mean over the counted samples, zero gradient on ignored rows), label smoothing
// with ignored samples, gradients against float64 finite differences, and the errors.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/factories.h"
#include "runtime/gradcheck.h"
#include "runtime/nn/functional.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::expect_throw_with;
using testing::random64;

Tensor targets_of(const std::vector<std::int64_t>& values, const Shape& sizes) {
  return Tensor::from_vector<std::int64_t>(values, sizes);
}

// -mean over counted samples of log softmax(logits)[target], from log_softmax (a separate op).
double reference_loss(const Tensor& logits2d, const std::vector<std::int64_t>& targets, std::int64_t ignore) {
  const auto log_p = F::log_softmax(logits2d, -1).to_vector<double>();
  const std::int64_t classes = logits2d.size(1);
  double total = 0;
  int counted = 0;
  for (std::size_t n = 0; n < targets.size(); ++n) {
    if (targets[n] == ignore) continue;
    total -= log_p[n * static_cast<std::size_t>(classes) + static_cast<std::size_t>(targets[n])];
    ++counted;
  }
  return total / counted;
}

TEST(CrossEntropy, SequenceShapeWithIgnoredTargetsMatchesTheReference) {
  const Tensor logits = random64({2, 3, 11}, 1).mul(2.0);
  const std::vector<std::int64_t> t = {4, -100, 10, 0, 7, -100};
  const Tensor loss = F::cross_entropy(logits, targets_of(t, {2, 3}));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(loss.item<double>(), reference_loss(logits.reshape({6, 11}), t, -100), 1e-13);
  // Another ignore_index; -100 is then an error.
  const std::vector<std::int64_t> t2 = {4, 3, 10, 0, 3, 1};
  const auto options = F::CrossEntropyFuncOptions().ignore_index(3);
  EXPECT_NEAR(F::cross_entropy(logits, targets_of(t2, {2, 3}), options).item<double>(),
              reference_loss(logits.reshape({6, 11}), t2, 3), 1e-13);
  expect_throw_with([&] { F::cross_entropy(logits, targets_of(t, {2, 3}), options); }, {"cross_entropy", "target -100"});
}

TEST(CrossEntropy, GradcheckWithIgnoredTargetsAndSmoothing) {
  Tensor logits = random64({2, 4, 6}, 2, true);
  const Tensor targets = targets_of({5, -100, 0, 2, -100, 1, 1, 3}, {2, 4});
  for (double smoothing : {0.0, 0.2}) {
    const auto options = F::CrossEntropyFuncOptions().label_smoothing(smoothing);
    EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], targets, options); },
                        {logits}),
              1e-6)
        << "label_smoothing " << smoothing;
  }
  // Ignored rows get exactly zero gradient.
  logits.set_grad({});
  F::cross_entropy(logits, targets).backward();
  const auto g = logits.grad().to_vector<double>();
  for (std::size_t row : {1u, 4u}) {
    for (std::size_t c = 0; c < 6; ++c) EXPECT_EQ(g[row * 6 + c], 0.0) << "row " << row;
  }
}

TEST(CrossEntropy, EveryTargetIgnoredGivesNaNAsPyTorch) {
  const Tensor loss = F::cross_entropy(random64({2, 3}, 3), targets_of({-100, -100}, {2}));
  EXPECT_TRUE(std::isnan(loss.item<double>()));
}

TEST(CrossEntropy, Float32LossFromFloat32Logits) {
  const Tensor logits = testing::random32({4, 5, 7}, 4);
  const Tensor targets = targets_of({0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5}, {4, 5});
  const Tensor loss = F::cross_entropy(logits, targets);
  EXPECT_EQ(loss.dtype(), DType::Float32);
  EXPECT_NEAR(loss.item<double>(), F::cross_entropy(logits.to(DType::Float64), targets).item<double>(), 1e-6);
}

TEST(CrossEntropy, ShapeAndDtypeErrors) {
  const Tensor logits = random64({2, 3, 5}, 5);
  expect_throw_with([&] { F::cross_entropy(logits, targets_of({0, 1, 2}, {3})); },
                    {"cross_entropy", "targets must be [2, 3]", "[2, 3, 5]", "got [3]"});
  expect_throw_with([&] { F::cross_entropy(random64({5}, 6), targets_of({0}, {1})); }, {"cross_entropy", "[N, C]"});
  expect_throw_with([&] { F::cross_entropy(logits, random64({2, 3}, 7)); }, {"cross_entropy", "int64"});
  expect_throw_with([&] { F::cross_entropy(random64({2, 5}, 8), targets_of({0, 1}, {2}), 1.5); },
                    {"label_smoothing"});
}

}  // namespace
}  // namespace sublet
