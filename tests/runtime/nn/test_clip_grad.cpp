// nn::utils::clip_grad_norm_ on the CPU: the global norm of several gradients (2, 1, 3 and
// infinity norms) against a float64 loop, scaling only when it exceeds max_norm, parameters
// without gradients skipped, the no-sync tensor form, and bad arguments.
#include "runtime/nn/clip_grad.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

using testing::random64;

struct Params {
  std::vector<Tensor> params;
  std::vector<std::vector<double>> grads;  // the original gradients
};

Params make_params(std::uint64_t seed) {
  Params p;
  for (const Shape& s : {Shape{3, 4}, Shape{5}, Shape{2, 2, 2}}) {
    Tensor t = random64(s, seed++, true);
    t.set_grad(random64(s, seed++).mul(2.0));
    p.grads.push_back(t.grad().to_vector<double>());
    p.params.push_back(t);
  }
  p.params.push_back(random64({4}, seed, true));  // no gradient: skipped
  return p;
}

double reference_norm(const Params& p, double norm_type) {
  double acc = 0;
  for (const auto& g : p.grads) {
    for (double v : g) acc = std::isinf(norm_type) ? std::fmax(acc, std::fabs(v)) : acc + std::pow(std::fabs(v), norm_type);
  }
  return std::isinf(norm_type) ? acc : std::pow(acc, 1.0 / norm_type);
}

TEST(ClipGradNorm, GlobalNormAndScaleForEachNormType) {
  for (double norm_type : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE("norm_type " + std::to_string(norm_type));
    Params p = make_params(10);
    const double expected = reference_norm(p, norm_type);
    const double max_norm = expected / 4;  // clips
    const double norm = nn::utils::clip_grad_norm_(p.params, max_norm, norm_type);
    EXPECT_NEAR(norm, expected, 1e-12 * expected);
    const double scale = max_norm / (expected + 1e-6);
    for (std::size_t i = 0; i < p.grads.size(); ++i) {
      const auto now = p.params[i].grad().to_vector<double>();
      for (std::size_t k = 0; k < now.size(); ++k) EXPECT_NEAR(now[k], p.grads[i][k] * scale, 1e-12);
    }
    EXPECT_FALSE(p.params[3].grad().defined());
  }
}

TEST(ClipGradNorm, BelowMaxNormLeavesGradientsAlone) {
  Params p = make_params(20);
  const double expected = reference_norm(p, 2.0);
  const Tensor norm = nn::utils::clip_grad_norm_tensor_(p.params, expected * 2);
  EXPECT_EQ(norm.dim(), 0);
  EXPECT_NEAR(norm.item<double>(), expected, 1e-5 * expected);  // float32 accumulation
  for (std::size_t i = 0; i < p.grads.size(); ++i) EXPECT_EQ(p.params[i].grad().to_vector<double>(), p.grads[i]);
}

TEST(ClipGradNorm, NonFiniteNormPoisonsTheGradientsAndBadArgumentsThrow) {
  Params p = make_params(30);
  Tensor g = p.params[0].grad();
  g.fill_(std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isnan(nn::utils::clip_grad_norm_(p.params, 1.0)));
  EXPECT_TRUE(std::isnan(p.params[1].grad().to_vector<double>()[0]));
  EXPECT_THROW(nn::utils::clip_grad_norm_(p.params, 1.0, 0.5), ValueError);
  EXPECT_THROW(nn::utils::clip_grad_norm_(p.params, -1.0), ValueError);
  EXPECT_EQ(nn::utils::clip_grad_norm_({}, 1.0), 0.0);
}

}  // namespace
}  // namespace sublet
