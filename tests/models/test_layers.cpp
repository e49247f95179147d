// nn layers (runtime/nn/{conv2d,batch_norm,pooling,activation,flatten,dropout}.h): forward
// against naive loops in float64 (tolerance 1e-12 relative, sums of a few hundred terms),
// train/eval behaviour, initialisation bounds and seeding, state names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/nn/activation.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/conv2d.h"
#include "runtime/nn/dropout.h"
#include "runtime/nn/flatten.h"
#include "runtime/nn/pooling.h"

namespace sublet {
namespace {

Tensor random64(const Shape& sizes, std::uint64_t seed) {
  Generator g(seed);
  return randn(sizes, g, DType::Float64);
}

// x[n][c][h][w] of a contiguous NCHW vector.
struct Nchw {
  const std::vector<double>& v;
  std::int64_t c, h, w;
  double at(std::int64_t n, std::int64_t ci, std::int64_t y, std::int64_t x) const {
    return v[((n * c + ci) * h + y) * w + x];
  }
};

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel_tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], rel_tol * std::max(1.0, std::abs(want[i]))) << "element " << i;
  }
}

TEST(Conv2dLayer, ForwardMatchesNaiveLoopWithStridePaddingAndBias) {
  Generator gen(3);
  nn::Conv2d conv(nn::Conv2dOptions(3, 4, {3, 2}).stride({2, 1}).padding({1, 0}).dtype(DType::Float64), gen);
  const Tensor x = random64({2, 3, 7, 6}, 11);
  const Tensor y = conv(x);
  ASSERT_EQ(y.sizes(), (Shape{2, 4, 4, 5}));  // (7 + 2 - 3)/2 + 1 = 4, (6 - 2)/1 + 1 = 5

  const auto xv = x.to_vector<double>(), wv = conv.weight.to_vector<double>(), bv = conv.bias.to_vector<double>();
  const Nchw in{xv, 3, 7, 6};
  std::vector<double> want;
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t o = 0; o < 4; ++o)
      for (std::int64_t oy = 0; oy < 4; ++oy)
        for (std::int64_t ox = 0; ox < 5; ++ox) {
          double acc = bv[o];
          for (std::int64_t c = 0; c < 3; ++c)
            for (std::int64_t ky = 0; ky < 3; ++ky)
              for (std::int64_t kx = 0; kx < 2; ++kx) {
                const std::int64_t iy = oy * 2 - 1 + ky, ix = ox + kx;
                if (iy < 0 || iy >= 7) continue;
                acc += in.at(n, c, iy, ix) * wv[((o * 3 + c) * 3 + ky) * 2 + kx];
              }
          want.push_back(acc);
        }
  expect_close(y.to_vector<double>(), want, 1e-12);
}

TEST(Conv2dLayer, DefaultInitIsUniformWithinOneOverSqrtFanInAndSeeded) {
  Generator a(5), b(5), c(6);
  nn::Conv2d conv_a(nn::Conv2dOptions(16, 32, 3), a), conv_b(nn::Conv2dOptions(16, 32, 3), b),
      conv_c(nn::Conv2dOptions(16, 32, 3), c);
  const double bound = 1.0 / std::sqrt(16.0 * 9.0);
  const auto w = conv_a.weight.to_vector<float>();
  double sum_sq = 0;
  for (float v : w) {
    EXPECT_LE(std::abs(v), bound + 1e-7);
    sum_sq += double(v) * v;
  }
  // U(-b, b) has standard deviation b / sqrt(3); 4608 draws put the estimate within a few %.
  EXPECT_NEAR(std::sqrt(sum_sq / w.size()), bound / std::sqrt(3.0), 0.05 * bound / std::sqrt(3.0));
  for (float v : conv_a.bias.to_vector<float>()) EXPECT_LE(std::abs(v), bound + 1e-7);
  EXPECT_EQ(w, conv_b.weight.to_vector<float>());
  EXPECT_EQ(conv_a.bias.to_vector<float>(), conv_b.bias.to_vector<float>());
  EXPECT_NE(w, conv_c.weight.to_vector<float>());
}

TEST(Conv2dLayer, StateNamesAndNoBias) {
  nn::Conv2d with_bias(nn::Conv2dOptions(2, 3, 1));
  nn::Conv2d without(nn::Conv2dOptions(2, 3, 1).bias(false));
  ASSERT_EQ(with_bias.named_parameters().size(), 2u);
  EXPECT_EQ(with_bias.named_parameters()[0].first, "weight");
  EXPECT_EQ(with_bias.named_parameters()[1].first, "bias");
  ASSERT_EQ(without.named_parameters().size(), 1u);
  EXPECT_FALSE(without.bias.defined());
  EXPECT_THROW(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)), ValueError);
}

TEST(BatchNorm2dLayer, TrainingNormalisesWithBatchStatsAndUpdatesRunningStats) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3).dtype(DType::Float64));
  const Tensor x = random64({4, 3, 5, 5}, 21).mul(2.0).add(0.5);
  const Tensor y = bn(x);
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  const std::int64_t per_channel = 4 * 25;
  const auto rm = bn.running_mean.to_vector<double>(), rv = bn.running_var.to_vector<double>();
  for (std::int64_t c = 0; c < 3; ++c) {
    double mean = 0, var = 0, out_mean = 0, out_var = 0;
    for (std::int64_t n = 0; n < 4; ++n)
      for (std::int64_t i = 0; i < 25; ++i) mean += xv[(n * 3 + c) * 25 + i];
    mean /= per_channel;
    for (std::int64_t n = 0; n < 4; ++n)
      for (std::int64_t i = 0; i < 25; ++i) {
        const double d = xv[(n * 3 + c) * 25 + i] - mean;
        var += d * d;
        out_mean += yv[(n * 3 + c) * 25 + i];
      }
    out_mean /= per_channel;
    for (std::int64_t n = 0; n < 4; ++n)
      for (std::int64_t i = 0; i < 25; ++i) {
        const double d = yv[(n * 3 + c) * 25 + i] - out_mean;
        out_var += d * d;
      }
    EXPECT_NEAR(out_mean, 0.0, 1e-12);
    // Normalised with the biased variance and eps = 1e-5: var(y) = var / (var + eps).
    const double biased = var / per_channel;
    EXPECT_NEAR(out_var / per_channel, biased / (biased + 1e-5), 1e-10);
    // Running statistics: momentum 0.1 from (0, 1), with the unbiased variance.
    EXPECT_NEAR(rm[c], 0.1 * mean, 1e-12);
    EXPECT_NEAR(rv[c], 0.9 + 0.1 * var / (per_channel - 1), 1e-12);
  }
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 1);
  bn(x);
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 2);
}

// The module hands num_batches_tracked to the batch norm kernels, which count the batch in their
// own launches where they can (ops::batch_norm_forward_training): one count per training call of
// forward and of forward_relu, none in eval, and momentum nullopt (the cumulative average) still
// sees the new count before it normalises.
TEST(BatchNorm2dLayer, CountsEachTrainingBatchOnce) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3).dtype(DType::Float64));
  const Tensor x = random64({4, 3, 5, 5}, 22);
  bn(x);
  bn.forward_relu(x, x);
  bn.forward_relu(x);
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 3);
  bn.eval();
  bn(x);
  bn.forward_relu(x);
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 3);

  nn::BatchNorm2d cumulative(nn::BatchNorm2dOptions(3).dtype(DType::Float64).momentum(std::nullopt));
  cumulative(x);
  cumulative(x.mul(3.0));
  EXPECT_EQ(cumulative.num_batches_tracked.item<std::int64_t>(), 2);
  // The cumulative average of the two batches' means: the second count (1/2) was used.
  const auto rm = cumulative.running_mean.to_vector<double>();
  const auto xv = x.to_vector<double>();
  for (std::int64_t c = 0; c < 3; ++c) {
    double mean = 0;
    for (std::int64_t n = 0; n < 4; ++n)
      for (std::int64_t i = 0; i < 25; ++i) mean += xv[(n * 3 + c) * 25 + i];
    mean /= 100;
    EXPECT_NEAR(rm[c], (mean + 3 * mean) / 2, 1e-12);
  }
}

TEST(BatchNorm2dLayer, FunctionalCountTakesOnlyAnInt64ScalarOnTheInputsDevice) {
  const Tensor x = random64({4, 3, 5, 5}, 23);
  const Tensor mean = zeros({3}, DType::Float64), var = ones({3}, DType::Float64);
  Tensor count = zeros({}, DType::Int64);
  nn::functional::batch_norm(x, mean, var, {}, {}, true, 0.1, 1e-5, count);
  nn::functional::batch_norm_relu(x, {}, mean, var, {}, {}, true, 0.1, 1e-5, count);
  EXPECT_EQ(count.item<std::int64_t>(), 2);
  nn::functional::batch_norm(x, mean, var, {}, {}, false, 0.1, 1e-5, count);  // eval: not counted
  EXPECT_EQ(count.item<std::int64_t>(), 2);
  EXPECT_THROW(nn::functional::batch_norm(x, mean, var, {}, {}, true, 0.1, 1e-5, zeros({}, DType::Float64)),
               ValueError);
  EXPECT_THROW(nn::functional::batch_norm(x, mean, var, {}, {}, true, 0.1, 1e-5, zeros({2}, DType::Int64)),
               ValueError);
}

TEST(BatchNorm2dLayer, EvalUsesRunningStatsAndLeavesThemAlone) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(2).dtype(DType::Float64));
  bn(random64({8, 2, 3, 3}, 31).add(1.0));  // one training step moves the running statistics
  {
    NoGradGuard no_grad;
    bn.weight.copy_(Tensor::from_vector<double>({1.5, -0.5}, {2}));
    bn.bias.copy_(Tensor::from_vector<double>({0.25, 2.0}, {2}));
  }
  bn.eval();
  const auto rm = bn.running_mean.to_vector<double>(), rv = bn.running_var.to_vector<double>();
  const Tensor x = random64({2, 2, 3, 3}, 32);
  const auto xv = x.to_vector<double>(), yv = bn(x).to_vector<double>();
  const double w[2] = {1.5, -0.5}, b[2] = {0.25, 2.0};
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const std::size_t c = (i / 9) % 2;
    EXPECT_NEAR(yv[i], (xv[i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * w[c] + b[c], 1e-12);
  }
  EXPECT_EQ(bn.running_mean.to_vector<double>(), rm);
  EXPECT_EQ(bn.running_var.to_vector<double>(), rv);
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 1);
}

TEST(BatchNorm2dLayer, StateNamesMatchPyTorchAndInitIsOnesZeros) {
  nn::BatchNorm2d bn(4);
  const auto params = bn.named_parameters(), buffers = bn.named_buffers();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[1].first, "bias");
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0].first, "running_mean");
  EXPECT_EQ(buffers[1].first, "running_var");
  EXPECT_EQ(buffers[2].first, "num_batches_tracked");
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::Int64);
  EXPECT_EQ(bn.weight.to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(bn.bias.to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_FALSE(bn.running_mean.requires_grad());
  EXPECT_THROW(bn(zeros({2, 3, 2, 2})), ShapeError);
}

TEST(BatchNorm2dLayer, CumulativeAverageWithoutMomentum) {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(1).momentum(std::nullopt).dtype(DType::Float64));
  bn(Tensor::from_vector<double>({1, 3}, {2, 1, 1, 1}));  // batch mean 2
  bn(Tensor::from_vector<double>({5, 7}, {2, 1, 1, 1}));  // batch mean 6
  // Factor 1/1 then 1/2: the plain average of the batch means.
  EXPECT_NEAR(bn.running_mean.item<double>(), 4.0, 1e-12);
}

TEST(PoolingLayers, MaxPoolMatchesNaiveLoop) {
  nn::MaxPool2d pool(nn::MaxPool2dOptions(3).stride(2).padding(1));
  const Tensor x = random64({2, 2, 7, 8}, 41);
  const Tensor y = pool(x);
  ASSERT_EQ(y.sizes(), (Shape{2, 2, 4, 4}));
  const auto xv = x.to_vector<double>();
  const Nchw in{xv, 2, 7, 8};
  std::vector<double> want;
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 2; ++c)
      for (std::int64_t oy = 0; oy < 4; ++oy)
        for (std::int64_t ox = 0; ox < 4; ++ox) {
          double best = -std::numeric_limits<double>::infinity();
          for (std::int64_t ky = 0; ky < 3; ++ky)
            for (std::int64_t kx = 0; kx < 3; ++kx) {
              const std::int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
              if (iy >= 0 && iy < 7 && ix >= 0 && ix < 8) best = std::max(best, in.at(n, c, iy, ix));
            }
          want.push_back(best);
        }
  expect_close(y.to_vector<double>(), want, 0.0);
}

TEST(PoolingLayers, AvgPoolAndAdaptiveAvgPoolMatchNaiveMeans) {
  const Tensor x = random64({2, 3, 4, 6}, 51);
  const auto xv = x.to_vector<double>();
  const Nchw in{xv, 3, 4, 6};
  nn::AvgPool2d avg(nn::AvgPool2dOptions(2));
  const Tensor y = avg(x);
  ASSERT_EQ(y.sizes(), (Shape{2, 3, 2, 3}));
  std::vector<double> want;
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t oy = 0; oy < 2; ++oy)
        for (std::int64_t ox = 0; ox < 3; ++ox)
          want.push_back((in.at(n, c, 2 * oy, 2 * ox) + in.at(n, c, 2 * oy + 1, 2 * ox) +
                          in.at(n, c, 2 * oy, 2 * ox + 1) + in.at(n, c, 2 * oy + 1, 2 * ox + 1)) / 4);
  expect_close(y.to_vector<double>(), want, 1e-12);

  nn::AdaptiveAvgPool2d global(nn::AdaptiveAvgPool2dOptions(1));
  const Tensor g = global(x);
  ASSERT_EQ(g.sizes(), (Shape{2, 3, 1, 1}));
  std::vector<double> means;
  for (std::int64_t nc = 0; nc < 6; ++nc) {
    double s = 0;
    for (std::int64_t i = 0; i < 24; ++i) s += xv[nc * 24 + i];
    means.push_back(s / 24);
  }
  expect_close(g.to_vector<double>(), means, 1e-12);
  EXPECT_THROW(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(0)), ValueError);
}

TEST(ActivationAndFlatten, ReluClampsNegativesAndFlattenKeepsBatch) {
  nn::ReLU relu;
  const Tensor x = random64({3, 4}, 61);
  const auto xv = x.to_vector<double>(), yv = relu(x).to_vector<double>();
  for (std::size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(yv[i], std::max(0.0, xv[i]));

  nn::Flatten flatten;
  const Tensor f = flatten(random64({2, 3, 4, 5}, 62));
  EXPECT_EQ(f.sizes(), (Shape{2, 60}));
  nn::Flatten inner(nn::FlattenOptions().start_dim(2));
  EXPECT_EQ(inner(random64({2, 3, 4, 5}, 63)).sizes(), (Shape{2, 3, 20}));
  // A transposed (non-contiguous) input still flattens in logical order.
  const Tensor t = random64({3, 4}, 64);
  const Tensor tf = nn::Flatten(nn::FlattenOptions().start_dim(0))(t.t());
  EXPECT_EQ(tf.to_vector<double>(), t.t().contiguous().to_vector<double>());
}

TEST(DropoutLayer, TrainingDropsAboutPAndScalesEvalIsIdentity) {
  Generator gen(71);
  nn::Dropout dropout(nn::DropoutOptions(0.3), gen);
  const Tensor x = ones({100, 100}, DType::Float64);
  const auto yv = dropout(x).to_vector<double>();
  std::int64_t zeros_count = 0;
  for (double v : yv) {
    if (v == 0.0) {
      ++zeros_count;
    } else {
      EXPECT_NEAR(v, 1.0 / 0.7, 1e-12);
    }
  }
  // 10,000 Bernoulli(0.3) draws: standard deviation ~46, so +-300 is far outside chance.
  EXPECT_NEAR(static_cast<double>(zeros_count), 3000.0, 300.0);

  dropout.eval();
  EXPECT_EQ(dropout(x).to_vector<double>(), x.to_vector<double>());

  Generator same(71);
  nn::Dropout replay(nn::DropoutOptions(0.3), same);
  EXPECT_EQ(replay(x).to_vector<double>(), yv);
  EXPECT_THROW(nn::Dropout(nn::DropoutOptions(1.5)), ValueError);
}

}  // namespace
}  // namespace sublet
