// nn::utils::clip_grad_norm_ on the CPU: the global norm of several gradients (2, 1, 3 and
// infinity norms) against a float64 loop, scaling only when it exceeds max_norm, parameters
// without gradients skipped, the no-sync tensor form, and bad arguments; bfloat16 and mixed
// gradients through the multi-tensor kernels, scaled as PyTorch's formula in float32 gives;
// strided gradients through the per-gradient Tensor ops, which agree with them.
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

// Parameters whose gradients have the given dtypes and sizes (random, scaled to norms near 10).
Params typed_params(const std::vector<std::pair<DType, std::int64_t>>& specs, std::uint64_t seed) {
  Params p;
  for (const auto& [dtype, numel] : specs) {
    Tensor t = zeros({numel}, TensorOptions().dtype(dtype));
    t.requires_grad_(true);
    t.set_grad(random64({numel}, seed++).mul(3.0).to(dtype));
    p.grads.push_back(t.grad().to_vector<double>());  // the values the gradient holds
    p.params.push_back(t);
  }
  return p;
}

// Each element as the multi-tensor scale writes it: the coefficient (1 / (norm + 1e-6)) *
// max_norm in float32, clamped to 1, rounded to the gradient's dtype, the product in float32.
void expect_scaled_as_pytorch(const Params& p, float norm, double max_norm) {
  float coefficient = (1.0f / (norm + 1e-6f)) * static_cast<float>(max_norm);
  coefficient = coefficient < 1.0f ? coefficient : 1.0f;
  for (std::size_t i = 0; i < p.grads.size(); ++i) {
    const Tensor g = p.params[i].grad();
    const Tensor c = full({}, coefficient).to(g.dtype()).to(DType::Float32);
    const std::int64_t n = static_cast<std::int64_t>(p.grads[i].size());
    const Tensor before = Tensor::from_vector(p.grads[i], {n}, TensorOptions().dtype(DType::Float64));
    const auto expected = before.to(DType::Float32).mul(c).to(g.dtype()).to_vector<double>();
    EXPECT_EQ(g.to_vector<double>(), expected) << "parameter " << i << " (" << dtype_name(g.dtype()) << ")";
  }
}

TEST(ClipGradNorm, BFloat16AndMixedGradientsInOneList) {
  const std::vector<std::vector<std::pair<DType, std::int64_t>>> lists = {
      {{DType::BFloat16, 1}, {DType::BFloat16, 8193}, {DType::BFloat16, 7}},
      {{DType::Float32, 20001}, {DType::BFloat16, 3}, {DType::Float16, 8191}, {DType::Float32, 5}}};
  std::uint64_t seed = 40;
  for (const auto& specs : lists) {
    Params p = typed_params(specs, seed);
    seed += 10;
    const double expected = reference_norm(p, 2.0);
    const Tensor norm = nn::utils::clip_grad_norm_tensor_(p.params, expected / 3);
    EXPECT_EQ(norm.dtype(), DType::Float32);
    EXPECT_NEAR(norm.item<double>(), expected, 1.2e-7 * expected);  // float64 sum, one float32 rounding
    expect_scaled_as_pytorch(p, norm.item<float>(), expected / 3);
  }
}

TEST(ClipGradNorm, ClippingBumpsTheGradientsVersionsAsAnInPlaceOpWould) {
  Params p = make_params(50);
  const std::uint64_t before = p.params[0].grad().storage().version();
  (void)nn::utils::clip_grad_norm_(p.params, 0.1);
  EXPECT_GT(p.params[0].grad().storage().version(), before);
}

// A strided gradient cannot be read as one array: the whole list takes the per-gradient Tensor
// ops, whose norm and scale agree with the multi-tensor kernels' to float32 rounding.
TEST(ClipGradNorm, StridedGradientsTakeTheTensorOpsAndAgree) {
  for (double norm_type : {2.0, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE("norm_type " + std::to_string(norm_type));
    Params dense = typed_params({{DType::Float32, 301}, {DType::Float32, 64}}, 60);
    Params strided = typed_params({{DType::Float32, 301}, {DType::Float32, 64}}, 60);
    const Tensor wide = zeros({64, 2});
    wide.select(1, 0).copy_(strided.params[1].grad());
    strided.params[1].set_grad(wide.select(1, 0));  // stride 2
    ASSERT_FALSE(strided.params[1].grad().is_non_overlapping_and_dense());
    const double max_norm = reference_norm(dense, norm_type) / 5;
    const double a = nn::utils::clip_grad_norm_(dense.params, max_norm, norm_type);
    const double b = nn::utils::clip_grad_norm_(strided.params, max_norm, norm_type);
    EXPECT_NEAR(a, b, 1e-6 * a);
    for (std::size_t i = 0; i < dense.params.size(); ++i) {
      const auto x = dense.params[i].grad().to_vector<double>(), y = strided.params[i].grad().to_vector<double>();
      for (std::size_t k = 0; k < x.size(); ++k) ASSERT_NEAR(x[k], y[k], 1e-6 * std::fabs(y[k]) + 1e-30) << i << " " << k;
    }
  }
}

}  // namespace
}  // namespace sublet
