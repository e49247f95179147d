// functional::gelu and nn::GELU on the CPU: both forms against their formulas written with
// Tensor ops (erf through a float64 loop), gradients against float64 finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/gradcheck.h"
#include "runtime/nn/activation.h"
#include "tests/runtime/runtime_test_util.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using testing::random64;

TEST(Gelu, BothFormsMatchTheirFormulas) {
  const Tensor x = random64({4, 50}, 1).mul(2.5);
  const auto xs = x.to_vector<double>();
  const auto exact = F::gelu(x).to_vector<double>();
  const auto approx = F::gelu(x, F::GeluApproximate::Tanh).to_vector<double>();
  double exact_err = 0, approx_err = 0, gap = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double e = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const double a = 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / std::acos(-1.0)) * (v + 0.044715 * v * v * v)));
    exact_err = std::fmax(exact_err, std::fabs(exact[i] - e));
    approx_err = std::fmax(approx_err, std::fabs(approx[i] - a));
    gap = std::fmax(gap, std::fabs(exact[i] - approx[i]));
    ASSERT_FALSE(std::isnan(exact[i]) || std::isnan(approx[i])) << "element " << i;
  }
  EXPECT_LE(exact_err, 1e-15);
  EXPECT_LE(approx_err, 1e-15);
  EXPECT_TRUE(gap > 1e-5 && gap <= 1e-2) << "the two forms differ by " << gap;  // not the same function
}

TEST(Gelu, GradcheckBothForms) {
  const Tensor x = random64({3, 17}, 2, true);
  for (auto approximate : {F::GeluApproximate::None, F::GeluApproximate::Tanh}) {
    EXPECT_LE(gradcheck([&](const std::vector<Tensor>& in) { return F::gelu(in[0], approximate); }, {x}), 1e-6)
        << ops::gelu_approximate_name(approximate);
  }
  // A strided input: the same values as its contiguous copy.
  const Tensor t = random64({6, 5}, 3).t();
  EXPECT_EQ(F::gelu(t).to_vector<double>(), F::gelu(t.contiguous()).to_vector<double>());
}

TEST(Gelu, ModuleUsesItsApproximation) {
  const Tensor x = testing::random32({10}, 4);
  nn::GELU tanh_gelu(nn::GELUOptions().approximate(F::GeluApproximate::Tanh));
  EXPECT_EQ(tanh_gelu.forward(x).to_vector<float>(), F::gelu(x, F::GeluApproximate::Tanh).to_vector<float>());
  EXPECT_EQ(nn::GELU().forward(x).to_vector<float>(), F::gelu(x).to_vector<float>());
}

}  // namespace
}  // namespace sublet
