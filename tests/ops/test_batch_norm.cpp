// batch_norm: forward (training and eval) and running statistics against a naive reference,
// every backward against float64 central finite differences, shape and argument errors.
#include "ops/batch_norm.h"

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

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

struct Reference {
  std::vector<double> output, mean, var_biased, var_unbiased;
};

Reference naive_batch_norm(const BatchNormShape& s, const std::vector<double>& x,
                           const std::vector<double>& weight, const std::vector<double>& bias) {
  Reference r;
  r.output.resize(x.size());
  const std::int64_t hw = s.spatial();
  const double count = static_cast<double>(s.batch * hw);
  for (std::int64_t c = 0; c < s.channels; ++c) {
    double sum = 0, squares = 0;
    for (std::int64_t n = 0; n < s.batch; ++n)
      for (std::int64_t i = 0; i < hw; ++i) sum += x[(n * s.channels + c) * hw + i];
    const double mean = sum / count;
    for (std::int64_t n = 0; n < s.batch; ++n)
      for (std::int64_t i = 0; i < hw; ++i) squares += std::pow(x[(n * s.channels + c) * hw + i] - mean, 2);
    r.mean.push_back(mean);
    r.var_biased.push_back(squares / count);
    r.var_unbiased.push_back(squares / (count - 1));
    for (std::int64_t n = 0; n < s.batch; ++n)
      for (std::int64_t i = 0; i < hw; ++i) {
        const std::size_t k = static_cast<std::size_t>((n * s.channels + c) * hw + i);
        r.output[k] = (x[k] - mean) / std::sqrt(squares / count + kEps) * weight[c] + bias[c];
      }
  }
  return r;
}

BatchNormShape make_shape(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return BatchNormShape{n, c, h, w};
}

// NCHW with spatial extent, a non-square one, and [N, C] (BatchNorm1d's layout).
std::vector<BatchNormShape> configurations() {
  return {make_shape(4, 3, 5, 6), make_shape(3, 2, 2, 7), make_shape(8, 5, 1, 1)};
}

// Training forward in float64 with fresh copies of the statistics, returning the output only.
std::vector<double> train_forward(const BatchNormShape& s, const std::vector<double>& x,
                                  const std::vector<double>* weight, const std::vector<double>* bias) {
  std::vector<double> out(x.size()), mean(s.channels), invstd(s.channels);
  batch_norm_forward_training(cpu_context(), s, DType::Float64, x.data(), weight ? weight->data() : nullptr,
                              bias ? bias->data() : nullptr, nullptr, nullptr, kMomentum, kEps,
                              out.data(), mean.data(), invstd.data());
  return out;
}

std::vector<double> eval_forward(const BatchNormShape& s, const std::vector<double>& x,
                                 const std::vector<double>& weight, const std::vector<double>& bias,
                                 const std::vector<double>& running_mean, const std::vector<double>& running_var) {
  std::vector<double> out(x.size());
  batch_norm_forward_eval(cpu_context(), s, DType::Float64, x.data(), weight.data(), bias.data(),
                          running_mean.data(), running_var.data(), kEps, out.data());
  return out;
}

TEST(BatchNormForward, TrainingMatchesReferenceAndUpdatesRunningStats) {
  std::uint64_t seed = 1;
  for (const BatchNormShape& s : configurations()) {
    SCOPED_TRACE(std::to_string(s.batch) + "x" + std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width));
    // Offset and scaled data, so that a wrong mean or variance cannot hide.
    const auto x = random_values(s.numel(), seed++, -2.0, 3.0);
    const auto weight = random_values(s.channels, seed++, 0.5, 1.5);
    const auto bias = random_values(s.channels, seed++);
    auto running_mean = random_values(s.channels, seed++);
    auto running_var = random_values(s.channels, seed++, 0.5, 2.0);
    const auto old_mean = running_mean, old_var = running_var;
    const Reference ref = naive_batch_norm(s, x, weight, bias);

    std::vector<double> out(x.size()), save_mean(s.channels), save_invstd(s.channels);
    batch_norm_forward_training(cpu_context(), s, DType::Float64, x.data(), weight.data(), bias.data(),
                                running_mean.data(), running_var.data(), kMomentum, kEps, out.data(),
                                save_mean.data(), save_invstd.data());
    EXPECT_LE(max_relative_error(out, ref.output), 1e-12);
    EXPECT_LE(max_relative_error(save_mean, ref.mean), 1e-12);
    for (std::int64_t c = 0; c < s.channels; ++c) {
      EXPECT_NEAR(save_invstd[c], 1 / std::sqrt(ref.var_biased[c] + kEps), 1e-12);
      // Running variance moves towards the unbiased variance, as in PyTorch.
      EXPECT_NEAR(running_mean[c], (1 - kMomentum) * old_mean[c] + kMomentum * ref.mean[c], 1e-12);
      EXPECT_NEAR(running_var[c], (1 - kMomentum) * old_var[c] + kMomentum * ref.var_unbiased[c], 1e-12);
    }

    // float32 agrees to float32 precision.
    const auto x32 = testing::cast_values<float>(x), w32 = testing::cast_values<float>(weight);
    const auto b32 = testing::cast_values<float>(bias);
    std::vector<float> out32(x.size()), mean32(s.channels), invstd32(s.channels);
    batch_norm_forward_training(cpu_context(), s, DType::Float32, x32.data(), w32.data(), b32.data(),
                                nullptr, nullptr, kMomentum, kEps, out32.data(), mean32.data(), invstd32.data());
    EXPECT_LE(max_relative_error(out32, ref.output), 1e-5);
  }
}

TEST(BatchNormForward, NoAffineIsWeightOneBiasZero) {
  const BatchNormShape s = make_shape(4, 3, 3, 5);
  const auto x = random_values(s.numel(), 11, -2.0, 3.0);
  const std::vector<double> ones(s.channels, 1.0), zeros(s.channels, 0.0);
  EXPECT_LE(max_relative_error(train_forward(s, x, nullptr, nullptr), naive_batch_norm(s, x, ones, zeros).output), 1e-12);
}

TEST(BatchNormForward, EvalUsesRunningStats) {
  const BatchNormShape s = make_shape(3, 4, 4, 3);
  const auto x = random_values(s.numel(), 21, -2.0, 3.0);
  const auto weight = random_values(s.channels, 22, 0.5, 1.5), bias = random_values(s.channels, 23);
  const auto running_mean = random_values(s.channels, 24), running_var = random_values(s.channels, 25, 0.5, 2.0);
  const auto out = eval_forward(s, x, weight, bias, running_mean, running_var);
  std::vector<double> expected(x.size());
  for (std::int64_t n = 0; n < s.batch; ++n)
    for (std::int64_t c = 0; c < s.channels; ++c)
      for (std::int64_t i = 0; i < s.spatial(); ++i) {
        const std::size_t k = static_cast<std::size_t>((n * s.channels + c) * s.spatial() + i);
        expected[k] = (x[k] - running_mean[c]) / std::sqrt(running_var[c] + kEps) * weight[c] + bias[c];
      }
  EXPECT_LE(max_relative_error(out, expected), 1e-12);
}

TEST(BatchNormBackward, TrainingGradientsMatchFiniteDifferences) {
  std::uint64_t seed = 100;
  for (const BatchNormShape& s : configurations()) {
    SCOPED_TRACE(std::to_string(s.batch) + "x" + std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width));
    const auto x = random_values(s.numel(), seed++, -2.0, 3.0);
    const auto weight = random_values(s.channels, seed++, 0.5, 1.5), bias = random_values(s.channels, seed++);
    const auto grad_output = random_values(s.numel(), seed++);
    std::vector<double> out(x.size()), save_mean(s.channels), save_invstd(s.channels);
    batch_norm_forward_training(cpu_context(), s, DType::Float64, x.data(), weight.data(), bias.data(),
                                nullptr, nullptr, kMomentum, kEps, out.data(), save_mean.data(), save_invstd.data());
    std::vector<double> grad_input(x.size()), grad_weight(s.channels), grad_bias(s.channels);
    batch_norm_backward_training(cpu_context(), s, DType::Float64, grad_output.data(), x.data(), weight.data(),
                                 save_mean.data(), save_invstd.data(), grad_input.data(), grad_weight.data(),
                                 grad_bias.data());
    EXPECT_LE(max_relative_error(grad_input, numeric_gradient([&](const std::vector<double>& v) {
                return train_forward(s, v, &weight, &bias); }, x, grad_output)), kGradientTolerance);
    EXPECT_LE(max_relative_error(grad_weight, numeric_gradient([&](const std::vector<double>& v) {
                return train_forward(s, x, &v, &bias); }, weight, grad_output)), kGradientTolerance);
    EXPECT_LE(max_relative_error(grad_bias, numeric_gradient([&](const std::vector<double>& v) {
                return train_forward(s, x, &weight, &v); }, bias, grad_output)), kGradientTolerance);

    // Without affine parameters, and asking for grad_input only.
    std::vector<double> plain_mean(s.channels), plain_invstd(s.channels), plain_out(x.size());
    batch_norm_forward_training(cpu_context(), s, DType::Float64, x.data(), nullptr, nullptr, nullptr, nullptr,
                                kMomentum, kEps, plain_out.data(), plain_mean.data(), plain_invstd.data());
    std::vector<double> plain_grad(x.size());
    batch_norm_backward_training(cpu_context(), s, DType::Float64, grad_output.data(), x.data(), nullptr,
                                 plain_mean.data(), plain_invstd.data(), plain_grad.data(), nullptr, nullptr);
    EXPECT_LE(max_relative_error(plain_grad, numeric_gradient([&](const std::vector<double>& v) {
                return train_forward(s, v, nullptr, nullptr); }, x, grad_output)), kGradientTolerance);
  }
}

TEST(BatchNormBackward, EvalGradientsMatchFiniteDifferences) {
  const BatchNormShape s = make_shape(3, 4, 3, 5);
  const auto x = random_values(s.numel(), 31, -2.0, 3.0);
  const auto weight = random_values(s.channels, 32, 0.5, 1.5), bias = random_values(s.channels, 33);
  const auto running_mean = random_values(s.channels, 34), running_var = random_values(s.channels, 35, 0.5, 2.0);
  const auto grad_output = random_values(s.numel(), 36);
  std::vector<double> grad_input(x.size()), grad_weight(s.channels), grad_bias(s.channels);
  batch_norm_backward_eval(cpu_context(), s, DType::Float64, grad_output.data(), x.data(), weight.data(),
                           running_mean.data(), running_var.data(), kEps, grad_input.data(),
                           grad_weight.data(), grad_bias.data());
  EXPECT_LE(max_relative_error(grad_input, numeric_gradient([&](const std::vector<double>& v) {
              return eval_forward(s, v, weight, bias, running_mean, running_var); }, x, grad_output)), kGradientTolerance);
  EXPECT_LE(max_relative_error(grad_weight, numeric_gradient([&](const std::vector<double>& v) {
              return eval_forward(s, x, v, bias, running_mean, running_var); }, weight, grad_output)), kGradientTolerance);
  EXPECT_LE(max_relative_error(grad_bias, numeric_gradient([&](const std::vector<double>& v) {
              return eval_forward(s, x, weight, v, running_mean, running_var); }, bias, grad_output)), kGradientTolerance);
}

TEST(BatchNormShapeCheck, BadShapesNameTheOpAndTheSizes) {
  try {
    make_shape(1, 3, 1, 1).validate(true);
    FAIL() << "training on one value per channel was accepted";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("batch_norm"), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 3, 1, 1]"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(make_shape(1, 3, 1, 1).validate(false));  // eval is fine with one sample
  try {
    make_shape(2, 0, 4, 4).validate(false);
    FAIL() << "zero channels were accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 0, 4, 4]"), std::string::npos) << e.what();
  }
}

TEST(BatchNormArguments, RejectsBadEpsMomentumAndDtype) {
  const BatchNormShape s = make_shape(2, 1, 2, 2);
  const auto x = random_values(s.numel(), 41);
  std::vector<double> out(x.size()), mean(1), invstd(1);
  EXPECT_THROW(batch_norm_forward_training(cpu_context(), s, DType::Float64, x.data(), nullptr, nullptr, nullptr,
                                           nullptr, 1.5, kEps, out.data(), mean.data(), invstd.data()), ValueError);
  EXPECT_THROW(batch_norm_forward_training(cpu_context(), s, DType::Float64, x.data(), nullptr, nullptr, nullptr,
                                           nullptr, kMomentum, 0.0, out.data(), mean.data(), invstd.data()), ValueError);
  EXPECT_THROW(batch_norm_forward_training(cpu_context(), s, DType::Int64, x.data(), nullptr, nullptr, nullptr,
                                           nullptr, kMomentum, kEps, out.data(), mean.data(), invstd.data()), DTypeError);
}

}  // namespace
}  // namespace sublet::ops
