// Elementwise ops against a naive loop reference, with NumPy broadcasting, on random data.
#include <cmath>
#include <functional>

#include "core/errors.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

// Reference for out = f(a, b) with broadcasting, computed element by element in double.
std::vector<double> reference(const Tensor& a, const Tensor& b, const Shape& out_sizes,
                              const std::function<double(double, double)>& f) {
  const auto va = a.to_vector<double>();
  const auto vb = b.to_vector<double>();
  std::vector<double> out(shape_numel(out_sizes));
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(out.size()); ++i) {
    const auto idx = testing::unravel(i, out_sizes);
    out[i] = f(va[testing::broadcast_source(idx, a.sizes())], vb[testing::broadcast_source(idx, b.sizes())]);
  }
  return out;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
}

struct Case {
  Shape a, b, out;
};

TEST(Broadcast, BinaryOpsMatchReference) {
  const std::vector<Case> cases = {
      {{2, 3}, {2, 3}, {2, 3}},       {{2, 3}, {3}, {2, 3}},          {{4, 1, 5}, {3, 1}, {4, 3, 5}},
      {{1}, {2, 2}, {2, 2}},          {{5, 1, 1}, {1, 6, 7}, {5, 6, 7}}, {{}, {3, 2}, {3, 2}},
  };
  std::uint64_t seed = 1;
  for (const auto& c : cases) {
    const Tensor a = testing::random64(c.a, seed++);
    const Tensor b = testing::random64(c.b, seed++).add(3.0);  // away from 0 for div
    EXPECT_EQ((a + b).sizes(), c.out);
    expect_near_all((a + b).to_vector<double>(), reference(a, b, c.out, std::plus<>()), 1e-15);
    expect_near_all((a - b).to_vector<double>(), reference(a, b, c.out, std::minus<>()), 1e-15);
    expect_near_all((a * b).to_vector<double>(), reference(a, b, c.out, std::multiplies<>()), 1e-15);
    expect_near_all((a / b).to_vector<double>(), reference(a, b, c.out, std::divides<>()), 1e-15);
    expect_near_all(a.add(b, 0.5).to_vector<double>(), reference(a, b, c.out, [](double x, double y) { return x + 0.5 * y; }), 1e-15);
    expect_near_all(a.maximum(b).to_vector<double>(), reference(a, b, c.out, [](double x, double y) { return std::max(x, y); }), 0);
  }
}

TEST(Broadcast, LargeStridedOperandsUseTheParallelPath) {
  // 300k elements (many chunks) with a transposed and a broadcast operand.
  const Tensor a = testing::random32({600, 500}, 11).t();  // [500, 600], strides (1, 500)
  const Tensor b = testing::random32({600}, 12);
  const Tensor out = a * b + 1.0;
  const auto want = reference(a, b, {500, 600}, [](double x, double y) { return static_cast<double>(static_cast<float>(x * y)) + 1.0; });
  expect_near_all(out.to_vector<double>(), want, 1e-6);
}

TEST(Broadcast, UnaryOpsMatchStd) {
  const Tensor x = testing::random64({3, 7}, 5);
  const auto v = x.to_vector<double>();
  const auto pos = x.pow(2.0).add(0.1);
  const auto vp = pos.to_vector<double>();
  auto check = [&](const Tensor& got, const std::vector<double>& in, const std::function<double(double)>& f) {
    const auto g = got.to_vector<double>();
    for (std::size_t i = 0; i < in.size(); ++i) ASSERT_NEAR(g[i], f(in[i]), 1e-14 * (1 + std::abs(f(in[i])))) << i;
  };
  check(x.neg(), v, [](double a) { return -a; });
  check(-x, v, [](double a) { return -a; });
  check(x.relu(), v, [](double a) { return a > 0 ? a : 0.0; });
  check(x.exp(), v, [](double a) { return std::exp(a); });
  check(pos.log(), vp, [](double a) { return std::log(a); });
  check(pos.sqrt(), vp, [](double a) { return std::sqrt(a); });
  check(pos.pow(1.5), vp, [](double a) { return std::pow(a, 1.5); });
  check(x.clamp(-0.5, 0.25), v, [](double a) { return std::min(std::max(a, -0.5), 0.25); });
  check(x.sigmoid(), v, [](double a) { return 1 / (1 + std::exp(-a)); });
  check(x.tanh(), v, [](double a) { return std::tanh(a); });
  check(2.0 - x, v, [](double a) { return 2.0 - a; });
  check(2.0 / pos, vp, [](double a) { return 2.0 / a; });
  check(x / 4.0, v, [](double a) { return a / 4.0; });
}

TEST(Broadcast, EqualityMask) {
  const Tensor predicted = Tensor::from_vector(std::vector<std::int64_t>{1, 0, 3, 3}, {4});
  const Tensor labels = Tensor::from_vector(std::vector<std::int64_t>{1, 2, 3, 0}, {4});
  EXPECT_EQ(predicted.eq(labels).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 0, 1, 0}));
  EXPECT_EQ(predicted.eq(labels).sum().item<std::int64_t>(), 2);
  const Tensor x = testing::random64({2, 3}, 9, true);
  const Tensor mask = x.eq(x.max(1, true).first);  // broadcast against the row maxima
  EXPECT_FALSE(mask.requires_grad());
  EXPECT_EQ(mask.sum().item<double>(), 2.0);
}

TEST(Broadcast, ErrorsNameOpAndBothShapes) {
  testing::expect_throw_with([] { zeros({2, 3}) + zeros({4, 3}); }, {"add: shapes [2, 3] and [4, 3] cannot be broadcast"});
  testing::expect_throw_with([] { zeros({2, 3}) * zeros({2}); }, {"mul", "[2, 3]", "[2]"});
  testing::expect_throw_with([] { zeros({5}) / zeros({2, 4}); }, {"div", "[5]", "[2, 4]"});
  EXPECT_THROW(zeros({2}) + zeros({2}, DType::Int64), DTypeError);
}

TEST(Broadcast, InPlaceOps) {
  Tensor a = ones({2, 3});
  a.add_(Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}), 2.0);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 5, 7, 3, 5, 7}));
  a.mul_(2.0).sub_(ones({2, 1}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{5, 9, 13, 5, 9, 13}));
  a.div_(full({1}, 2.0)).clamp_(3.0, 6.0);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{3, 4.5, 6, 3, 4.5, 6}));
  Tensor m = zeros({3});
  m.addcmul_(full({3}, 2.0), full({3}, 3.0), 0.5).addcdiv_(full({3}, 1.0), full({3}, 4.0), 2.0);
  EXPECT_EQ(m.to_vector<float>(), std::vector<float>(3, 3.5f));
  // The result must fit the in-place target.
  testing::expect_throw_with([] { Tensor t = zeros({3}); t.add_(zeros({2, 3})); }, {"add_", "[3]", "[2, 3]"});
  // copy_ broadcasts and casts.
  Tensor d = zeros({2, 2}, DType::Float64);
  d.copy_(Tensor::from_vector(std::vector<std::int64_t>{4, 5}, {2}));
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{4, 5, 4, 5}));
}

TEST(Broadcast, InPlaceOnTensorsRequiringGradNeedsNoGrad) {
  Tensor w = ones({3}, TensorOptions().requires_grad(true));
  testing::expect_throw_with([&] { w.add_(ones({3})); }, {"add_", "NoGradGuard"});
  {
    NoGradGuard no_grad;
    w.add_(ones({3}), -0.5);
  }
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(3, 0.5f));
}

}  // namespace
}  // namespace sublet
