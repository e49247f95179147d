// log_softmax, nll_loss, cross_entropy (with label smoothing): forward against naive formulas,
// every backward against float64 central finite differences, target and shape errors.
#include "ops/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/errors.h"
#include "nn_test_support.h"

namespace sublet::ops {
namespace {

using testing::cpu_context;
using testing::kGradientTolerance;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_values;

std::vector<double> naive_log_softmax(const ClassScoresShape& s, const std::vector<double>& x) {
  std::vector<double> out(x.size());
  for (std::int64_t n = 0; n < s.batch; ++n) {
    double sum = 0;
    for (std::int64_t j = 0; j < s.classes; ++j) sum += std::exp(x[n * s.classes + j]);
    for (std::int64_t j = 0; j < s.classes; ++j) out[n * s.classes + j] = x[n * s.classes + j] - std::log(sum);
  }
  return out;
}

// PyTorch: (1 - eps) * nll + eps * mean over classes of -log p, averaged over the batch.
double naive_cross_entropy(const ClassScoresShape& s, const std::vector<double>& logits,
                           const std::vector<std::int64_t>& targets, double eps) {
  const auto log_p = naive_log_softmax(s, logits);
  double total = 0;
  for (std::int64_t n = 0; n < s.batch; ++n) {
    double uniform = 0;
    for (std::int64_t j = 0; j < s.classes; ++j) uniform -= log_p[n * s.classes + j];
    total += (1 - eps) * -log_p[n * s.classes + targets[n]] + eps * uniform / double(s.classes);
  }
  return total / double(s.batch);
}

std::vector<std::int64_t> random_targets(const ClassScoresShape& s, std::uint64_t seed) {
  std::vector<std::int64_t> targets;
  for (double u : random_values(s.batch, seed, 0.0, 1.0)) targets.push_back(static_cast<std::int64_t>(u * double(s.classes)));
  return targets;
}

std::vector<double> log_softmax_of(const ClassScoresShape& s, const std::vector<double>& x) {
  std::vector<double> out(x.size());
  log_softmax_forward(cpu_context(), s, DType::Float64, x.data(), out.data());
  return out;
}

std::vector<double> cross_entropy_of(const ClassScoresShape& s, const std::vector<double>& logits,
                                     const std::vector<std::int64_t>& targets, double eps) {
  std::vector<double> loss(1), lse(static_cast<std::size_t>(s.batch));
  cross_entropy_forward(cpu_context(), s, DType::Float64, logits.data(), targets.data(), CrossEntropyParams{eps},
                        loss.data(), lse.data());
  return loss;
}

const std::vector<ClassScoresShape> kShapes = {{5, 7}, {16, 10}, {3, 1}};

TEST(LogSoftmax, ForwardMatchesReferenceAndIsStableForLargeLogits) {
  std::uint64_t seed = 1;
  for (const ClassScoresShape& s : kShapes) {
    const auto x = random_values(s.numel(), seed++, -3.0, 3.0);
    // Absolute differences: with one class every log-probability is 0 and a ratio says nothing.
    const auto expected = naive_log_softmax(s, x);
    const auto out = log_softmax_of(s, x);
    const auto x32 = testing::cast_values<float>(x);
    std::vector<float> out32(x.size());
    log_softmax_forward(cpu_context(), s, DType::Float32, x32.data(), out32.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(out[i], expected[i], 1e-14);
      EXPECT_NEAR(out32[i], expected[i], 1e-6);  // values of size <= ~8 in float32
    }
  }
  // exp(1000) overflows: only the max-shifted form gives finite values.
  const ClassScoresShape s{1, 3};
  const auto out = log_softmax_of(s, {1000.0, 999.0, 998.0});
  const auto expected = naive_log_softmax(s, {2.0, 1.0, 0.0});
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(out[j], expected[j], 1e-12);
}

TEST(LogSoftmax, BackwardMatchesFiniteDifferences) {
  std::uint64_t seed = 100;
  for (const ClassScoresShape& s : kShapes) {
    const auto x = random_values(s.numel(), seed++, -3.0, 3.0);
    const auto grad_output = random_values(s.numel(), seed++);
    const auto out = log_softmax_of(s, x);
    std::vector<double> grad_input(x.size());
    log_softmax_backward(cpu_context(), s, DType::Float64, grad_output.data(), out.data(), grad_input.data());
    EXPECT_LE(max_relative_error(grad_input, numeric_gradient([&](const std::vector<double>& v) {
                return log_softmax_of(s, v); }, x, grad_output)), kGradientTolerance);
  }
}

TEST(NllLoss, ForwardAndBackward) {
  std::uint64_t seed = 200;
  for (const ClassScoresShape& s : kShapes) {
    const auto log_p = naive_log_softmax(s, random_values(s.numel(), seed++, -3.0, 3.0));
    const auto targets = random_targets(s, seed++);
    double expected = 0;
    for (std::int64_t n = 0; n < s.batch; ++n) expected -= log_p[n * s.classes + targets[n]] / double(s.batch);
    double loss = 0;
    nll_loss_forward(cpu_context(), s, DType::Float64, log_p.data(), targets.data(), &loss);
    EXPECT_NEAR(loss, expected, 1e-14);

    const double grad_loss = 0.7;  // not 1, so that a dropped upstream gradient shows
    std::vector<double> grad(log_p.size());
    nll_loss_backward(cpu_context(), s, DType::Float64, &grad_loss, targets.data(), grad.data());
    const auto numeric = numeric_gradient([&](const std::vector<double>& v) {
      std::vector<double> l(1);
      nll_loss_forward(cpu_context(), s, DType::Float64, v.data(), targets.data(), l.data());
      return l;
    }, log_p, {grad_loss});
    EXPECT_LE(max_relative_error(grad, numeric), kGradientTolerance);
  }
}

TEST(CrossEntropy, ForwardMatchesReferenceWithAndWithoutSmoothing) {
  std::uint64_t seed = 300;
  for (const ClassScoresShape& s : kShapes) {
    const auto logits = random_values(s.numel(), seed++, -3.0, 3.0);
    const auto targets = random_targets(s, seed++);
    for (double eps : {0.0, 0.1, 0.35, 1.0}) {
      SCOPED_TRACE("label_smoothing " + std::to_string(eps));
      EXPECT_NEAR(cross_entropy_of(s, logits, targets, eps)[0], naive_cross_entropy(s, logits, targets, eps), 1e-13);
    }
    // Without smoothing it is nll_loss(log_softmax(x)).
    const auto log_p = log_softmax_of(s, logits);
    double nll = 0;
    nll_loss_forward(cpu_context(), s, DType::Float64, log_p.data(), targets.data(), &nll);
    EXPECT_NEAR(cross_entropy_of(s, logits, targets, 0.0)[0], nll, 1e-14);
    const auto logits32 = testing::cast_values<float>(logits);
    float loss32 = 0;
    std::vector<float> lse32(static_cast<std::size_t>(s.batch));
    cross_entropy_forward(cpu_context(), s, DType::Float32, logits32.data(), targets.data(), CrossEntropyParams{0.1},
                          &loss32, lse32.data());
    EXPECT_NEAR(loss32, naive_cross_entropy(s, logits, targets, 0.1), 1e-5);
  }
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  std::uint64_t seed = 400;
  for (const ClassScoresShape& s : kShapes) {
    const auto logits = random_values(s.numel(), seed++, -3.0, 3.0);
    const auto targets = random_targets(s, seed++);
    const double grad_loss = 1.3;
    for (double eps : {0.0, 0.1, 0.35}) {
      SCOPED_TRACE("label_smoothing " + std::to_string(eps));
      std::vector<double> grad(logits.size()), lse(static_cast<std::size_t>(s.batch));
      double loss = 0;
      const CrossEntropyParams params{eps};
      cross_entropy_forward(cpu_context(), s, DType::Float64, logits.data(), targets.data(), params, &loss, lse.data());
      cross_entropy_backward(cpu_context(), s, DType::Float64, &grad_loss, logits.data(), targets.data(), lse.data(),
                             params, grad.data());
      EXPECT_LE(max_relative_error(grad, numeric_gradient([&](const std::vector<double>& v) {
                  return cross_entropy_of(s, v, targets, eps); }, logits, {grad_loss})), kGradientTolerance);
    }
  }
}

TEST(LossErrors, TargetOutsideClassesNamesSampleAndRange) {
  const ClassScoresShape s{3, 4};
  const auto logits = random_values(s.numel(), 500);
  double loss = 0;
  std::vector<double> lse(3);
  for (std::int64_t bad : {4, -1}) {
    const std::vector<std::int64_t> targets = {0, bad, 2};
    try {
      cross_entropy_forward(cpu_context(), s, DType::Float64, logits.data(), targets.data(), {}, &loss, lse.data());
      FAIL() << "target " << bad << " was accepted";
    } catch (const ValueError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("cross_entropy"), std::string::npos) << message;
      EXPECT_NE(message.find("target " + std::to_string(bad)), std::string::npos) << message;
      EXPECT_NE(message.find("sample 1"), std::string::npos) << message;
      EXPECT_NE(message.find("[0, 4)"), std::string::npos) << message;
    }
    EXPECT_THROW(nll_loss_forward(cpu_context(), s, DType::Float64, logits.data(), targets.data(), &loss), ValueError);
  }
}

TEST(LossErrors, BadSmoothingShapeAndDtype) {
  const ClassScoresShape s{2, 3};
  const auto logits = random_values(s.numel(), 501);
  const std::vector<std::int64_t> targets = {0, 2};
  double loss = 0;
  std::vector<double> lse(2);
  EXPECT_THROW(cross_entropy_forward(cpu_context(), s, DType::Float64, logits.data(), targets.data(),
                                     CrossEntropyParams{1.5}, &loss, lse.data()),
               ValueError);
  EXPECT_THROW(cross_entropy_forward(cpu_context(), s, DType::Int64, logits.data(), targets.data(), {}, &loss, lse.data()),
               DTypeError);
  try {
    ClassScoresShape{0, 3}.validate("log_softmax");
    FAIL() << "an empty batch was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("log_softmax"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sublet::ops
