// Matrix products against a naive triple loop, for plain, transposed and batched operands.
#include "core/errors.h"
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

TEST(Matmul, ErrorsNameShapes) {
  testing::expect_throw_with([] { zeros({2, 3}).matmul(zeros({4, 5})); }, {"matmul", "[2, 3]", "[4, 5]"});
  testing::expect_throw_with([] { zeros({3}).matmul(zeros({3, 2})); }, {"matmul", "[3]"});
  testing::expect_throw_with([] { zeros({2, 2, 3}).matmul(zeros({3, 3, 1})); }, {"batch", "[2, 2, 3]", "[3, 3, 1]"});
  EXPECT_THROW(arange(4).view({2, 2}).matmul(arange(4).view({2, 2})), DTypeError);
}

}  // namespace
}  // namespace sublet
