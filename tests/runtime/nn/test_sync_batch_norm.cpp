// Synchronised batch norm (runtime/nn/sync_batch_norm.h) on the CPU, in float64, against the
// plain training-mode batch norm:
//  - a world of one (the rank sum is the identity): the same outputs, gradients and running
//    statistics, to rounding;
//  - two ranks holding the same batch (the rank sum doubles): the statistics of the doubled
//    batch are the batch's own, so outputs and every gradient equal one rank's plain batch norm.
//    A backward that did not sum the gradients over ranks would halve the statistics' share of
//    the input gradient, and this test catches it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/factories.h"
#include "runtime/nn/batch_norm.h"
#include "runtime/nn/functional.h"
#include "runtime/nn/sync_batch_norm.h"
#include "tests/nan_safe_max.h"

namespace sublet::nn {
namespace {

struct Result {
  std::vector<double> out, grad_input, grad_weight, grad_bias, running_mean, running_var;
};

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = testing::nan_safe_max(worst, std::abs(a[i] - b[i]));
  return worst;
}

Result run(bool synced, bool relu_with_residual) {
  Generator g(5);
  const TensorOptions f64 = TensorOptions().dtype(DType::Float64);
  Tensor x = randn({4, 3, 5, 5}, g, f64);
  x.requires_grad_(true);
  Tensor residual = randn({4, 3, 5, 5}, g, f64);
  Tensor w = (randn({3}, g, f64) + 1.0).detach();
  w.requires_grad_(true);
  Tensor b = randn({3}, g, f64);
  b.requires_grad_(true);
  Tensor rm = zeros({3}, f64), rv = ones({3}, f64);
  Tensor weights = randn({4, 3, 5, 5}, g, f64);  // a loss that is not symmetric in the outputs
  Tensor out;
  if (synced) {
    out = sync_batch_norm(x, relu_with_residual ? residual : Tensor(), relu_with_residual, rm, rv, w, b, 0.1, 1e-5);
  } else {
    out = functional::batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
    if (relu_with_residual) out = (out + residual).relu();
  }
  (out * weights).sum().backward();
  return {out.detach().to_vector<double>(), x.grad().to_vector<double>(), w.grad().to_vector<double>(),
          b.grad().to_vector<double>(), rm.to_vector<double>(), rv.to_vector<double>()};
}

void expect_close(const Result& a, const Result& b, double tolerance) {
  EXPECT_LE(max_difference(a.out, b.out), tolerance) << "output";
  EXPECT_LE(max_difference(a.grad_input, b.grad_input), tolerance) << "input gradient";
  EXPECT_LE(max_difference(a.grad_weight, b.grad_weight), tolerance) << "weight gradient";
  EXPECT_LE(max_difference(a.grad_bias, b.grad_bias), tolerance) << "bias gradient";
  EXPECT_LE(max_difference(a.running_mean, b.running_mean), tolerance) << "running mean";
  EXPECT_LE(max_difference(a.running_var, b.running_var), tolerance) << "running variance";
}

TEST(SyncBatchNorm, AWorldOfOneIsPlainBatchNorm) {
  const Result plain = run(false, false);
  SyncBatchNormScope world_of_one([](Tensor&) {});
  expect_close(run(true, false), plain, 1e-10);
  expect_close(run(true, true), run(false, true), 1e-10);
}

TEST(SyncBatchNorm, TwoRanksWithTheSameBatchGiveOneRanksGradients) {
  Result plain = run(false, true);
  SyncBatchNormScope two_identical_ranks([](Tensor& t) { t.mul_(2.0); });
  const Result synced = run(true, true);
  // The running variance is unbiased over the values of all ranks: n / (n - 1) becomes
  // 2n / (2n - 1), n = 4 x 5 x 5 per channel. Running = 0.9 x 1 + 0.1 x unbiased variance.
  const double n = 100.0;
  for (double& v : plain.running_var) {
    const double population = (v - 0.9) / 0.1 * (n - 1.0) / n;
    v = 0.9 + 0.1 * population * (2.0 * n) / (2.0 * n - 1.0);
  }
  expect_close(synced, plain, 1e-10);
}

TEST(SyncBatchNorm, BatchNorm2dTrainsWithTheSyncedStatisticsOnlyInTraining) {
  BatchNorm2d bn(3);
  Generator g(9);
  const Tensor x = randn({2, 3, 4, 4}, g);
  int sums = 0;
  SyncBatchNormScope counting([&sums](Tensor&) { ++sums; });
  bn.train();
  bn(x);
  EXPECT_EQ(sums, 3) << "the count, the sum and the squared deviations, once each";
  bn.eval();
  bn(x);
  EXPECT_EQ(sums, 3) << "evaluation uses the running statistics: nothing to sum";
}

TEST(SyncBatchNorm, RefusesWithoutAScopeAndWithOneValuePerChannel) {
  const Tensor x = ones({1, 2, 1, 1});
  EXPECT_THROW(sync_batch_norm(x, {}, false, {}, {}, {}, {}, 0.1, 1e-5), Error);
  SyncBatchNormScope world_of_one([](Tensor&) {});
  EXPECT_THROW(sync_batch_norm(x, {}, false, {}, {}, {}, {}, 0.1, 1e-5), ValueError);
}

}  // namespace
}  // namespace sublet::nn
