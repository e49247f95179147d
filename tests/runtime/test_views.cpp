// View ops share storage and allocate nothing; their values match index arithmetic.
#include "core/errors.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

using testing::cpu_allocated;
using testing::cpu_allocation_count;

std::vector<float> iota_values(std::int64_t n) {
  std::vector<float> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(Views, AllocateNothingAndShareStorage) {
  Tensor base = Tensor::from_vector(iota_values(24), {2, 3, 4});
  const std::size_t bytes = cpu_allocated();
  const std::int64_t count = cpu_allocation_count();
  std::vector<Tensor> views = {base.view({6, 4}), base.reshape({4, 6}), base.permute({2, 0, 1}), base.transpose(0, 2),
                               base.narrow(1, 1, 2), base.slice(2, 0, 4, 2), base.select(0, 1), base.unsqueeze(1),
                               base.unsqueeze(1).expand({2, 5, 3, 4}), base.narrow(0, 0, 1).squeeze(),
                               base.flatten(), base.flatten(1), base.contiguous(), base.detach()};
  EXPECT_EQ(cpu_allocated(), bytes);
  EXPECT_EQ(cpu_allocation_count(), count);
  for (const auto& v : views) EXPECT_TRUE(v.storage().is_same(base.storage())) << v.to_string();
}

TEST(Views, PermuteTransposeValues) {
  const Shape sizes{2, 3, 4};
  Tensor base = Tensor::from_vector(iota_values(24), sizes);
  const Tensor p = base.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_FALSE(p.is_contiguous());
  const auto values = p.contiguous().to_vector<float>();
  for (std::int64_t i = 0; i < 24; ++i) {
    const auto idx = testing::unravel(i, p.sizes());  // (k, i0, j)
    EXPECT_EQ(values[i], static_cast<float>(testing::ravel({idx[1], idx[2], idx[0]}, sizes)));
  }
  EXPECT_EQ(base.transpose(-1, 0).sizes(), (Shape{4, 3, 2}));
  EXPECT_THROW(base.permute({0, 0, 1}), ShapeError);
  EXPECT_THROW(base.t(), ShapeError);
}

TEST(Views, NarrowSliceSelectValues) {
  Tensor base = Tensor::from_vector(iota_values(20), {4, 5});
  EXPECT_EQ(base.narrow(1, 1, 3).narrow(0, 2, 1).to_vector<float>(), (std::vector<float>{11, 12, 13}));
  EXPECT_EQ(base.slice(1, 0, 5, 2).select(0, 3).to_vector<float>(), (std::vector<float>{15, 17, 19}));
  EXPECT_EQ(base.slice(0, -2, 100).select(1, -1).to_vector<float>(), (std::vector<float>{14, 19}));
  testing::expect_throw_with([&] { base.narrow(1, 3, 3); }, {"narrow", "[4, 5]"});
  testing::expect_throw_with([&] { base.select(2, 0); }, {"dimension 2", "[4, 5]"});
}

TEST(Views, GradientsOfSlicesOfOneTensorAddUp) {
  // Three slices of y = 2x along its last dim, as q, k and v of one projection, the last two
  // overlapping at index 4 and the third strided; the gradient the engine collects for y (a
  // node's output, so the later slices add into the first one's) must be the sum of each
  // slice's part.
  const Tensor x = testing::random64({2, 3, 9}, 1, /*requires_grad=*/true);
  const Tensor a = testing::random64({2, 3, 2}, 2), b = testing::random64({2, 3, 3}, 3),
               c = testing::random64({2, 3, 3}, 4);
  const Tensor y = x.mul(2.0);
  const Tensor loss = y.narrow(2, 0, 2).mul(a).sum() + y.narrow(2, 2, 3).mul(b).sum() +
                      y.slice(2, 4, 9, 2).mul(c).sum();
  loss.backward();
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  std::vector<double> expected(2 * 3 * 9, 0.0);
  for (std::int64_t r = 0; r < 6; ++r) {
    for (std::int64_t j = 0; j < 2; ++j) expected[r * 9 + j] += av[r * 2 + j];
    for (std::int64_t j = 0; j < 3; ++j) expected[r * 9 + 2 + j] += bv[r * 3 + j];
    for (std::int64_t j = 0; j < 3; ++j) expected[r * 9 + 4 + 2 * j] += cv[r * 3 + j];
  }
  for (double& e : expected) e *= 2.0;
  const auto got = x.grad().to_vector<double>();
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_DOUBLE_EQ(got[i], expected[i]) << "element " << i;
}

TEST(Views, WritesThroughViewsReachTheBase) {
  Tensor base = zeros({3, 4});
  Tensor column = base.select(1, 2);
  column.fill_(7.0);
  Tensor block = base.narrow(0, 1, 2).narrow(1, 0, 2);
  block.add_(ones({2}));
  const auto v = base.to_vector<float>();
  EXPECT_EQ(v, (std::vector<float>{0, 0, 7, 0, 1, 1, 7, 0, 1, 1, 7, 0}));
}

TEST(Views, ExpandSqueezeUnsqueeze) {
  Tensor row = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  const Tensor e = row.expand({2, 3});
  EXPECT_EQ(e.strides(), (Shape{0, 1}));
  EXPECT_EQ(e.contiguous().to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(row.unsqueeze(1).expand({-1, 2}).contiguous().to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(row.unsqueeze(0).unsqueeze(2).sizes(), (Shape{1, 3, 1}));
  EXPECT_EQ(row.unsqueeze(0).unsqueeze(2).squeeze(0).sizes(), (Shape{3, 1}));
  EXPECT_EQ(row.unsqueeze(-1).sizes(), (Shape{3, 1}));
  testing::expect_throw_with([&] { row.expand({2, 4}); }, {"expand", "[3]", "[2, 4]"});
}

TEST(Views, ContiguousCopiesOnlyWhenNeeded) {
  Tensor base = Tensor::from_vector(iota_values(6), {2, 3});
  EXPECT_TRUE(base.contiguous().is_same(base));
  const std::int64_t count = cpu_allocation_count();
  Tensor t = base.t();
  EXPECT_FALSE(t.is_contiguous());
  Tensor c = t.contiguous();
  EXPECT_EQ(cpu_allocation_count(), count + 1);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.storage().is_same(base.storage()));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  // a size-1 dim's stride does not matter for contiguity
  EXPECT_TRUE(base.narrow(0, 1, 1).is_contiguous());
}

TEST(Views, ViewNeedsCompatibleStridesReshapeCopies) {
  Tensor base = Tensor::from_vector(iota_values(12), {3, 4});
  testing::expect_throw_with([&] { base.t().view({12}); }, {"view", "reshape"});
  const Tensor r = base.t().reshape({12});
  EXPECT_FALSE(r.storage().is_same(base.storage()));
  EXPECT_EQ(r.to_vector<float>()[1], 4.0f);
  // Splitting a dim of a non-contiguous tensor is still a view.
  const Tensor split = base.t().view({2, 2, 3});
  EXPECT_TRUE(split.storage().is_same(base.storage()));
  EXPECT_EQ(base.view({-1, 6}).sizes(), (Shape{2, 6}));
  testing::expect_throw_with([&] { base.view({5, -1}); }, {"[5, -1]", "[3, 4]"});
}

TEST(Views, FlattenRanges) {
  Tensor base = zeros({2, 3, 4, 5});
  EXPECT_EQ(base.flatten().sizes(), (Shape{120}));
  EXPECT_EQ(base.flatten(1).sizes(), (Shape{2, 60}));
  EXPECT_EQ(base.flatten(1, 2).sizes(), (Shape{2, 12, 5}));
}

}  // namespace
}  // namespace sublet
