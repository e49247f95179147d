// Every differentiable op's backward against central finite differences in float64
// (GradcheckOptions defaults: eps 1e-6), random seeded inputs, tolerance 1e-6.
#include <cmath>
#include <limits>

#include "runtime/autograd/function.h"
#include "runtime/gradcheck.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using testing::random64;
using Inputs = std::vector<Tensor>;
constexpr double kTolerance = 1e-6;

void expect_gradcheck(const GradcheckFn& fn, const Inputs& inputs) {
  const GradcheckResult r = gradcheck_report(fn, inputs);
  EXPECT_LE(r.max_error, kTolerance) << r.worst;
}

// Positive inputs, away from 0, for log / sqrt / pow / div.
Tensor positive64(const Shape& sizes, std::uint64_t seed) { return random64(sizes, seed).pow(2.0).add(0.5); }

TEST(Gradcheck, BroadcastingBinaryOps) {
  const Inputs in = {random64({3, 4}, 1), random64({4}, 2)};
  expect_gradcheck([](const Inputs& x) { return x[0] + x[1]; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].add(x[1], 0.3); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0] - x[1]; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].sub(x[1], 2.0); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0] * x[1]; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0] / x[1]; }, {random64({2, 1, 3}, 3), positive64({4, 1}, 4)});
  expect_gradcheck([](const Inputs& x) { return x[0].maximum(x[1]); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].minimum(x[1]); }, in);
}

TEST(Gradcheck, ScalarAndUnaryOps) {
  const Inputs in = {random64({3, 5}, 5)};
  const Inputs pos = {positive64({3, 5}, 6)};
  expect_gradcheck([](const Inputs& x) { return x[0] + 2.0; }, in);
  expect_gradcheck([](const Inputs& x) { return 3.0 - x[0]; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0] * -1.5; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0] / 4.0; }, in);
  expect_gradcheck([](const Inputs& x) { return 2.0 / x[0]; }, pos);
  expect_gradcheck([](const Inputs& x) { return -x[0]; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].relu(); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].exp(); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].log(); }, pos);
  expect_gradcheck([](const Inputs& x) { return x[0].sqrt(); }, pos);
  expect_gradcheck([](const Inputs& x) { return x[0].pow(3.0); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].pow(-0.5); }, pos);
  expect_gradcheck([](const Inputs& x) { return x[0].clamp(-0.5, 0.7); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].sigmoid(); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].tanh(); }, in);
}

TEST(Gradcheck, Reductions) {
  const Inputs in = {random64({3, 4, 5}, 7)};
  expect_gradcheck([](const Inputs& x) { return x[0].sum(); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].sum({1}); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].sum({0, 2}, true); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].mean(); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].mean({-1}, true); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].max(1).first; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].min(2, true).first; }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].max(); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].t().sum({0}); }, {random64({4, 6}, 8)});
}

TEST(Gradcheck, Gather) {
  const Tensor index = Tensor::from_vector(std::vector<std::int64_t>{2, 0, 2, 1, 1, 0}, {3, 2});
  expect_gradcheck([](const Inputs& x) { return x[0].gather(1, x[1]); }, {random64({3, 4}, 9), index});
}

TEST(Gradcheck, Matmul) {
  expect_gradcheck([](const Inputs& x) { return x[0].matmul(x[1]); }, {random64({3, 4}, 10), random64({4, 2}, 11)});
  expect_gradcheck([](const Inputs& x) { return x[0].matmul(x[1]); }, {random64({2, 3, 4}, 12), random64({2, 4, 5}, 13)});
  expect_gradcheck([](const Inputs& x) { return x[0].matmul(x[1]); }, {random64({2, 3, 4}, 14), random64({4, 5}, 15)});
  expect_gradcheck([](const Inputs& x) { return x[0].t().matmul(x[1].t()); }, {random64({4, 3}, 16), random64({2, 4}, 17)});
}

TEST(Gradcheck, Views) {
  const Inputs in = {random64({2, 3, 4}, 18)};
  expect_gradcheck([](const Inputs& x) { return x[0].view({6, 4}); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].permute({2, 0, 1}).reshape({4, 6}); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].transpose(0, 2); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].narrow(2, 1, 2); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].slice(2, 0, 4, 3); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].select(1, 2); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].unsqueeze(1).expand({2, 5, 3, 4}); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].narrow(0, 1, 1).squeeze().unsqueeze(0); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].flatten(1); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].permute({1, 0, 2}).contiguous(); }, in);
  expect_gradcheck([](const Inputs& x) { return x[0].clone() * x[0]; }, in);
}

TEST(Gradcheck, SmallNetwork) {
  // A two-layer MLP with a mean-squared loss: several ops, shared parameters, broadcasting.
  const Inputs in = {random64({5, 4}, 19), random64({4, 6}, 20), random64({6}, 21), random64({6, 2}, 22)};
  expect_gradcheck(
      [](const Inputs& x) {
        Tensor h = (x[0].matmul(x[1]) + x[2]).tanh();
        Tensor y = h.matmul(x[3]);
        return (y - 0.5).pow(2.0).mean({1});
      },
      in);
}

TEST(Gradcheck, CatchesAWrongBackward) {
  // A custom op whose backward is off by 10%: the checker must report it.
  auto wrong_square = [](const Inputs& x) {
    Tensor out;
    {
      NoGradGuard no_grad;
      out = x[0] * x[0];
    }
    autograd::record("wrong_square", {x[0]}, {out}, [saved = autograd::save(x[0])](const autograd::TensorList& g) {
      return autograd::TensorList{g[0] * saved * 2.2};
    });
    return out;
  };
  const GradcheckResult r = gradcheck_report(wrong_square, {random64({4}, 23).add(3.0)});
  EXPECT_GT(r.max_error, 0.05) << r.worst;
  EXPECT_NE(r.worst.find("input 0"), std::string::npos);
}

TEST(Gradcheck, CatchesANaNBackward) {
  // A backward that returns NaN for one element (the forward is fine): max_error must be NaN,
  // so that EXPECT_LE(max_error, tolerance) fails, and `worst` must name the element.
  auto nan_backward = [](const Inputs& x) {
    Tensor out;
    {
      NoGradGuard no_grad;
      out = x[0] * 2.0;
    }
    autograd::record("nan_backward", {x[0]}, {out}, [](const autograd::TensorList& g) {
      Tensor grad = g[0] * 2.0;
      grad.data<double>()[2] = std::numeric_limits<double>::quiet_NaN();
      return autograd::TensorList{grad};
    });
    return out;
  };
  const GradcheckResult r = gradcheck_report(nan_backward, {random64({5}, 26)});
  EXPECT_TRUE(std::isnan(r.max_error)) << r.max_error << " " << r.worst;
  EXPECT_FALSE(r.max_error <= kTolerance);
  EXPECT_NE(r.worst.find("element 2"), std::string::npos) << r.worst;
}

TEST(Gradcheck, OnlyFlaggedInputsAreChecked) {
  // product(a, b) = a * b with a deliberately wrong gradient for a: flagging only b hides it,
  // checking every float64 input (nothing flagged) reveals it.
  auto product = [](const Inputs& x) {
    Tensor out;
    {
      NoGradGuard no_grad;
      out = x[0] * x[1];
    }
    autograd::record("product", {x[0], x[1]}, {out},
                     [a = autograd::save(x[0]), b = autograd::save(x[1])](const autograd::TensorList& g) {
                       return autograd::TensorList{g[0] * b * 3.0, g[0] * a};
                     });
    return out;
  };
  const Tensor a = random64({3}, 24).add(3.0);
  const Tensor b = random64({3}, 25).add(3.0);
  EXPECT_LE(gradcheck(product, {a, b.detach().requires_grad_(true)}), kTolerance);
  EXPECT_GT(gradcheck(product, {a, b}), 0.1);
  EXPECT_THROW(gradcheck([](const Inputs& x) { return x[0] * 2.0; }, {ones({2})}), Error);
}

}  // namespace
}  // namespace sublet
