// Matrix products against a naive triple loop, for plain, transposed and batched operands.
#include "core/errors.h"
#include "runtime/autograd/backward_observer.h"
#include "runtime/gradcheck.h"
#include "runtime/nn/functional.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

// Naive [m,k]@[k,n] for batch element b of (possibly 2-D, broadcast) operands.
std::vector<double> naive(const Tensor& a, const Tensor& b) {
  const Tensor a3 = a.dim() == 2 ? a.unsqueeze(0) : a;
  const Tensor b3 = b.dim() == 2 ? b.unsqueeze(0) : b;
  const std::int64_t batch = std::max(a3.size(0), b3.size(0)), m = a3.size(1), k = a3.size(2), n = b3.size(2);
  const auto va = a3.to_vector<double>(), vb = b3.to_vector<double>();
  std::vector<double> out(batch * m * n, 0.0);
  for (std::int64_t p = 0; p < batch; ++p) {
    const std::int64_t pa = a3.size(0) == 1 ? 0 : p, pb = b3.size(0) == 1 ? 0 : p;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t q = 0; q < k; ++q)
          out[(p * m + i) * n + j] += va[(pa * m + i) * k + q] * vb[(pb * k + q) * n + j];
  }
  return out;
}

void expect_matches(const Tensor& got, const std::vector<double>& want, double tol) {
  const auto g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], want[i], tol) << i;
}

TEST(Matmul, TwoDimensional) {
  const Tensor a = testing::random64({5, 7}, 1), b = testing::random64({7, 3}, 2);
  const Tensor c = a.matmul(b);
  EXPECT_EQ(c.sizes(), (Shape{5, 3}));
  expect_matches(c, naive(a, b), 1e-12);
}

TEST(Matmul, TransposedViewsAreReadInPlace) {
  const Tensor a = testing::random64({7, 5}, 3), b = testing::random64({3, 7}, 4);
  const std::int64_t count = testing::cpu_allocation_count();
  const Tensor c = a.t().matmul(b.t());
  EXPECT_EQ(testing::cpu_allocation_count(), count + 1);  // the result only
  expect_matches(c, naive(a.t(), b.t()), 1e-12);
  // A layout with no unit stride (every other column) is copied first, and still right.
  const Tensor wide = testing::random64({5, 14}, 5);
  expect_matches(wide.slice(1, 0, 14, 2).matmul(b.t()), naive(wide.slice(1, 0, 14, 2), b.t()), 1e-12);
}

TEST(Matmul, BatchedAndBroadcast) {
  const Tensor a = testing::random64({4, 3, 6}, 6), b = testing::random64({4, 6, 2}, 7), w = testing::random64({6, 2}, 8);
  expect_matches(a.matmul(b), naive(a, b), 1e-12);
  EXPECT_EQ(a.matmul(w).sizes(), (Shape{4, 3, 2}));
  expect_matches(a.matmul(w), naive(a, w), 1e-12);
  expect_matches(a.transpose(1, 2).transpose(1, 2).matmul(b.transpose(1, 2).transpose(1, 2)), naive(a, b), 1e-12);
}

TEST(Matmul, LargeFloat32MatchesDouble) {
  const Tensor a = testing::random32({128, 96}, 9), b = testing::random32({96, 80}, 10);
  const auto want = naive(a.to(DType::Float64), b.to(DType::Float64));
  expect_matches(a.matmul(b), want, 1e-4);
}

// Batch dims beyond one, broadcasting as torch.matmul: each output matrix against the naive
// product of the operand matrices its batch index selects.
TEST(Matmul, FourDimensionalWithBroadcastBatchDims) {
  const Tensor a = testing::random64({2, 1, 3, 4}, 11), b = testing::random64({3, 4, 5}, 12);
  const Tensor c = a.matmul(b);
  ASSERT_EQ(c.sizes(), (Shape{2, 3, 3, 5}));
  for (std::int64_t i = 0; i < 2; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      expect_matches(c.select(0, i).select(0, j), naive(a.select(0, i).select(0, 0), b.select(0, j)), 1e-12);
    }
  }
  // Attention's shapes: [B, H, T, d] @ [B, H, d, T] from a transposed view (read in place or copied).
  const Tensor q = testing::random64({2, 3, 5, 4}, 13), k = testing::random64({2, 3, 5, 4}, 14);
  const Tensor scores = q.matmul(k.transpose(-2, -1));
  ASSERT_EQ(scores.sizes(), (Shape{2, 3, 5, 5}));
  expect_matches(scores.select(0, 1).select(0, 2), naive(q.select(0, 1).select(0, 2), k.select(0, 1).select(0, 2).t()),
                 1e-12);
  // [B, T, C] @ [C, N] (a Linear's input), from a non-contiguous input.
  const Tensor x = testing::random64({5, 3, 4}, 15).transpose(0, 1), w = testing::random64({4, 6}, 16);
  expect_matches(x.matmul(w).select(0, 2), naive(x.select(0, 2), w), 1e-12);
}

TEST(Matmul, VectorOperandsAsTorch) {
  const Tensor v = testing::random64({4}, 17), m = testing::random64({4, 3}, 18), batch = testing::random64({2, 3, 4}, 19);
  EXPECT_EQ(v.matmul(m).sizes(), (Shape{3}));
  expect_matches(v.matmul(m), naive(v.unsqueeze(0), m), 1e-12);
  EXPECT_EQ(batch.matmul(v).sizes(), (Shape{2, 3}));
  expect_matches(batch.matmul(v), naive(batch, v.unsqueeze(1)), 1e-12);
  EXPECT_EQ(v.matmul(v).dim(), 0);
  EXPECT_NEAR(v.matmul(v).item<double>(), v.mul(v).sum().item<double>(), 1e-12);
}

TEST(Matmul, GradcheckNdBroadcastAndLinear) {
  const Tensor a = testing::random64({2, 1, 3, 4}, 20, true), b = testing::random64({3, 4, 2}, 21, true);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return in[0].matmul(in[1]); }, {a, b}), 1e-6);
  const Tensor x = testing::random64({2, 3, 5}, 22, true), w = testing::random64({4, 5}, 23, true),
               bias = testing::random64({4}, 24, true);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return nn::functional::linear(in[0], in[1], in[2]); },
                      {x, w, bias}),
            1e-6);
  const Tensor v = testing::random64({5}, 25, true);
  EXPECT_LE(gradcheck([](const std::vector<Tensor>& in) { return in[0].matmul(in[1].t()); }, {v, w}), 1e-6);
}

// Counts the engine's work on leaf gradients (an add, a cast or a layout copy).
struct LeafGradientTouches : autograd::BackwardObserver {
  int touches = 0;
  void about_to_touch_leaf_gradient(const TensorImpl&) override { ++touches; }
};

// A weight used through its transposed view (x @ w.t(), a linear) gets its gradient row-major like
// the weight itself, so the leaf takes it as it is, with no layout copy.
TEST(Matmul, TransposedWeightGetsARowMajorGradient) {
  const Tensor x = testing::random64({2, 3, 5}, 30), g = testing::random64({2, 3, 4}, 31);
  const std::vector<double> expected = naive(g.reshape({-1, 4}).t(), x.reshape({-1, 5}));
  for (const bool through_linear : {false, true}) {
    Tensor w = testing::random64({4, 5}, 32, true);
    LeafGradientTouches observer;
    {
      autograd::BackwardObserverGuard guard(observer);
      const Tensor y = through_linear ? nn::functional::linear(x, w, Tensor()) : x.matmul(w.t());
      y.mul(g).sum().backward();
    }
    EXPECT_EQ(observer.touches, 0) << (through_linear ? "linear" : "matmul") << ": the gradient needed a copy";
    EXPECT_TRUE(w.grad().is_contiguous());
    expect_matches(w.grad(), expected, 1e-12);
  }
}

TEST(Matmul, ErrorsNameShapes) {
  testing::expect_throw_with([] { zeros({2, 3}).matmul(zeros({4, 5})); }, {"matmul", "[2, 3]", "[4, 5]"});
  testing::expect_throw_with([] { zeros({3}).matmul(zeros({4, 2})); }, {"matmul", "[1, 3]", "[4, 2]"});
  testing::expect_throw_with([] { zeros({}).matmul(zeros({3, 2})); }, {"matmul", "at least one dimension", "[]"});
  testing::expect_throw_with([] { zeros({2, 2, 3}).matmul(zeros({3, 3, 1})); }, {"batch", "[2, 2, 3]", "[3, 3, 1]"});
  EXPECT_THROW(arange(4).view({2, 2}).matmul(arange(4).view({2, 2})), DTypeError);
}

}  // namespace
}  // namespace sublet
