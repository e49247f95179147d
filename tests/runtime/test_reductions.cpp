// Reductions against naive loops on random data, including strided inputs and large sizes.
#include <algorithm>
#include <cmath>

#include "core/errors.h"
#include "runtime_test_util.h"

namespace sublet {
namespace {

// Naive sum over `dims` (keepdim layout) of a row-major vector of shape `sizes`.
std::vector<double> naive_sum(const std::vector<double>& v, const Shape& sizes, const std::vector<bool>& reduce) {
  Shape out_sizes = sizes;
  for (std::size_t d = 0; d < sizes.size(); ++d) if (reduce[d]) out_sizes[d] = 1;
  std::vector<double> out(shape_numel(out_sizes), 0.0);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(v.size()); ++i) {
    auto idx = testing::unravel(i, sizes);
    for (std::size_t d = 0; d < sizes.size(); ++d) if (reduce[d]) idx[d] = 0;
    out[testing::ravel(idx, out_sizes)] += v[i];
  }
  return out;
}

TEST(Reductions, SumAndMeanOverDims) {
  const Shape sizes{3, 4, 5};
  const Tensor x = testing::random64(sizes, 1);
  const auto v = x.to_vector<double>();
  const std::vector<std::pair<Shape, std::vector<bool>>> cases = {
      {{0}, {true, false, false}}, {{1}, {false, true, false}}, {{-1}, {false, false, true}},
      {{0, 2}, {true, false, true}}, {{}, {true, true, true}}};
  for (const auto& [dims, reduce] : cases) {
    const auto want = naive_sum(v, sizes, reduce);
    const Tensor kept = x.sum(dims, true);
    const auto got = kept.to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12);
    const Tensor dropped = x.sum(dims, false);
    EXPECT_EQ(dropped.numel(), kept.numel());
    EXPECT_EQ(dropped.dim(), 3 - std::count(reduce.begin(), reduce.end(), true)) << shape_str(dims);
    std::int64_t n = 1;
    for (std::size_t d = 0; d < sizes.size(); ++d) if (reduce[d]) n *= sizes[d];
    EXPECT_NEAR(x.mean(dims, true).to_vector<double>()[0], want[0] / n, 1e-12);
  }
  EXPECT_EQ(x.sum({0, 2}).sizes(), (Shape{4}));
  EXPECT_EQ(x.sum().sizes(), Shape{});
  testing::expect_throw_with([&] { x.sum({3}); }, {"sum", "dimension 3", "[3, 4, 5]"});
  testing::expect_throw_with([&] { arange(4).mean(); }, {"mean", "int64"});
}

TEST(Reductions, StridedInputNeedsNoCopy) {
  const Tensor x = testing::random64({6, 8}, 2);
  const Tensor xt = x.t();
  const auto a = xt.sum({1}).to_vector<double>();
  const auto b = x.sum({0}).to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12);
  const std::int64_t count = testing::cpu_allocation_count();
  const Tensor s = xt.sum({0}, true);  // allocates only the result
  EXPECT_EQ(testing::cpu_allocation_count(), count + 1);
}

TEST(Reductions, LargeFloat32SumIsAccurateAndThreadIndependent) {
  const Tensor x = testing::random32({1 << 20}, 3).add(1.0f);
  const auto v = x.to_vector<float>();
  double want = 0;
  for (float f : v) want += f;
  const double got = x.sum().item<double>();
  EXPECT_NEAR(got, want, 1e-6 * std::abs(want));
  EXPECT_EQ(got, x.sum().item<double>());
  const Tensor rows = x.view({2, 1 << 19}).sum({1});
  EXPECT_NEAR(rows.sum().item<double>(), want, 1e-5 * std::abs(want));
}

TEST(Reductions, MaxMinWithIndices) {
  const Tensor x = testing::random64({4, 6}, 4);
  const auto v = x.to_vector<double>();
  const auto [values, indices] = x.max(1);
  EXPECT_EQ(indices.dtype(), DType::Int64);
  EXPECT_EQ(values.sizes(), (Shape{4}));
  const auto vv = values.to_vector<double>();
  const auto vi = indices.to_vector<std::int64_t>();
  for (int r = 0; r < 4; ++r) {
    std::int64_t best = 0;
    for (int c = 1; c < 6; ++c) if (v[r * 6 + c] > v[r * 6 + best]) best = c;
    EXPECT_EQ(vi[r], best);
    EXPECT_EQ(vv[r], v[r * 6 + best]);
  }
  const auto [mins, min_idx] = x.min(0, true);
  EXPECT_EQ(mins.sizes(), (Shape{1, 6}));
  for (int c = 0; c < 6; ++c) {
    std::int64_t best = 0;
    for (int r = 1; r < 4; ++r) if (v[r * 6 + c] < v[best * 6 + c]) best = r;
    EXPECT_EQ(min_idx.to_vector<std::int64_t>()[c], best);
  }
  const std::int64_t flat = x.argmax().item<std::int64_t>();
  EXPECT_EQ(x.max().item<double>(), v[flat]);
  EXPECT_EQ(x.argmax(1, true).sizes(), (Shape{4, 1}));
  const Tensor ties = Tensor::from_vector(std::vector<float>{1, 3, 3, 2}, {4});
  EXPECT_EQ(ties.argmax().item<std::int64_t>(), 1);  // first maximum wins
}

TEST(Reductions, GatherPicksAlongDim) {
  const Tensor x = Tensor::from_vector(std::vector<float>{10, 11, 12, 20, 21, 22}, {2, 3});
  const Tensor idx = Tensor::from_vector(std::vector<std::int64_t>{2, 0, 1, 1}, {2, 2});
  EXPECT_EQ(x.gather(1, idx).to_vector<float>(), (std::vector<float>{12, 10, 21, 21}));
  const Tensor idx0 = Tensor::from_vector(std::vector<std::int64_t>{1, 0, 1}, {1, 3});
  EXPECT_EQ(x.gather(0, idx0).to_vector<float>(), (std::vector<float>{20, 11, 22}));
  const Tensor bad = Tensor::from_vector(std::vector<std::int64_t>{3}, {1, 1});
  EXPECT_THROW(x.narrow(0, 0, 1).gather(1, bad), ValueError);
}

}  // namespace
}  // namespace sublet
