// The CPU tensor kernels called directly on raw buffers (no runtime/): random shapes and strides
// (transposed, broadcast, sliced) against naive index arithmetic, including sizes large enough
// for the OpenMP path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/errors.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace sublet::ops {
namespace {

Context cpu() { return Context::for_device(Device::cpu()); }

// Element offset of row-major index `linear` under `strides`.
std::int64_t offset_of(std::int64_t linear, const Shape& sizes, const Shape& strides) {
  std::int64_t off = 0;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    off += (linear % sizes[d]) * strides[d];
    linear /= sizes[d];
  }
  return off;
}

// A random strided layout over a buffer: permuted dims, some broadcast (stride 0), some
// stepped (every other element).
struct Layout {
  Shape strides;
  std::int64_t span = 1;  // buffer elements needed
};

Layout random_layout(const Shape& sizes, std::mt19937_64& rng, bool allow_broadcast) {
  std::vector<std::size_t> order(sizes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  Layout l;
  l.strides.assign(sizes.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t i : order) {
    const auto kind = rng() % 4;
    if (allow_broadcast && kind == 0) continue;  // stride 0
    const std::int64_t step = kind == 1 ? 2 : 1;
    l.strides[i] = stride * step;
    stride *= sizes[i] * step;
  }
  l.span = stride;
  return l;
}

TEST(TensorKernelsCpu, BinaryOnRandomLayoutsMatchesNaive) {
  std::mt19937_64 rng(1);
  const std::vector<Shape> shapes = {{7}, {3, 5}, {2, 3, 4}, {4, 1, 3, 5}, {300, 257}};
  for (const auto& sizes : shapes) {
    for (int trial = 0; trial < 4; ++trial) {
      const Layout la = random_layout(sizes, rng, true), lb = random_layout(sizes, rng, true);
      const Layout lo = random_layout(sizes, rng, false);
      std::vector<double> a(la.span), b(lb.span), out(lo.span, -1.0);
      for (auto& v : a) v = static_cast<double>(rng() % 1000) / 7.0;
      for (auto& v : b) v = static_cast<double>(rng() % 1000) / 11.0 + 1.0;
      binary(cpu(), BinaryOp::Sub, DType::Float64, sizes, {out.data(), lo.strides}, {a.data(), la.strides},
             {b.data(), lb.strides}, 0.5);
      const std::int64_t n = shape_numel(sizes);
      for (std::int64_t i = 0; i < n; ++i) {
        const double want = a[offset_of(i, sizes, la.strides)] - 0.5 * b[offset_of(i, sizes, lb.strides)];
        ASSERT_EQ(out[offset_of(i, sizes, lo.strides)], want) << "shape " << sizes.size() << "-D, element " << i;
      }
    }
  }
}

TEST(TensorKernelsCpu, ReluBackwardPassesTheGradientOnlyWhereTheOutputIsPositive) {
  // threshold_backward's semantics: 0 where relu's output is <= 0, even for an inf or NaN
  // gradient there (a 0/1 mask times the gradient would give NaN).
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> g{1.5, -2.0, inf, nan, 3.0, -inf, 0.25, nan};
  const std::vector<double> y{0.5, 2.0, 0.0, -1.0, 1e-300, -0.0, -3.0, 4.0};
  std::vector<double> out(8, -7.0);
  binary(cpu(), BinaryOp::ReluBackward, DType::Float64, {2, 4}, {out.data(), {4, 1}}, {g.data(), {4, 1}},
         {y.data(), {4, 1}});
  const std::vector<double> want{1.5, -2.0, 0.0, 0.0, 3.0, 0.0, 0.0};
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(out[i], want[i]) << i;
  EXPECT_TRUE(std::isnan(out[7]));  // a NaN gradient where the output is positive passes through
}

TEST(TensorKernelsCpu, CopyCastsBetweenDtypes) {
  const Shape sizes{3, 4};
  std::vector<double> src(12);
  for (int i = 0; i < 12; ++i) src[i] = i * 1.75 - 5;
  std::vector<std::int64_t> dst(12);
  // Transposed read: dst[i, j] = src[j * 3 + i] viewed as [3, 4] with strides (1, 3).
  copy(cpu(), sizes, DType::Int64, {dst.data(), {4, 1}}, DType::Float64, {src.data(), {1, 3}});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(dst[i * 4 + j], static_cast<std::int64_t>(src[j * 3 + i]));
  std::vector<float> filled(8, 0.0f);
  fill(cpu(), DType::Float32, {4}, {filled.data(), {2}}, 3.5);
  EXPECT_EQ(filled, (std::vector<float>{3.5f, 0, 3.5f, 0, 3.5f, 0, 3.5f, 0}));
}

TEST(TensorKernelsCpu, TransposedCopyUsesTilesAndStaysExact) {
  // src is [3, 45, 37] contiguous; dst[b, r, c] = src[b, c, r] for dst [3, 37, 45] contiguous,
  // sizes not multiples of the tile, cast float64 -> float32; then a large one for the threads.
  for (const Shape& s : {Shape{3, 45, 37}, Shape{1, 700, 900}}) {
    const std::int64_t batch = s[0], cols = s[1], rows = s[2];
    std::vector<double> src(batch * cols * rows);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i) * 0.5;
    std::vector<float> dst(src.size(), -1.0f);
    copy(cpu(), {batch, rows, cols}, DType::Float32, {dst.data(), {rows * cols, cols, 1}}, DType::Float64,
         {src.data(), {cols * rows, 1, rows}});
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(dst[(b * rows + r) * cols + c], static_cast<float>(src[(b * cols + c) * rows + r]));
  }
}

TEST(TensorKernelsCpu, SumOverPermutedDimsAndMaxIndices) {
  // in: [4, 5, 6] contiguous; reduce dims 0 and 2, keep dim 1.
  std::vector<double> in(120);
  for (int i = 0; i < 120; ++i) in[i] = std::sin(i * 0.37);
  ReduceGeometry g{{5}, {6}, {4, 6}, {30, 1}};
  std::vector<double> out(5);
  reduce_sum(cpu(), DType::Float64, g, out.data(), in.data(), 0.5);
  for (int k = 0; k < 5; ++k) {
    double want = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 6; ++j) want += in[i * 30 + k * 6 + j];
    EXPECT_NEAR(out[k], 0.5 * want, 1e-12);
  }
  ReduceGeometry along{{4, 6}, {30, 1}, {5}, {6}};
  std::vector<double> values(24);
  std::vector<std::int64_t> indices(24);
  reduce_extremum(cpu(), ExtremumKind::Max, DType::Float64, along, values.data(), indices.data(), in.data());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      int best = 0;
      for (int k = 1; k < 5; ++k) if (in[i * 30 + k * 6 + j] > in[i * 30 + best * 6 + j]) best = k;
      EXPECT_EQ(indices[i * 6 + j], best);
      EXPECT_EQ(values[i * 6 + j], in[i * 30 + best * 6 + j]);
    }
}

TEST(TensorKernelsCpu, ScatterAndGatherCheckIndices) {
  std::vector<float> table{1, 2, 3, 4, 5, 6};  // [2, 3]
  std::vector<std::int64_t> idx{2, 0};         // one index per row
  ScatterGeometry g{{2}, {3}, 1, 3, 1, {1, 1}, {1, 1}};
  std::vector<float> picked(2);
  gather(cpu(), DType::Float32, g, picked.data(), idx.data(), table.data());
  EXPECT_EQ(picked, (std::vector<float>{3, 4}));
  std::vector<float> acc(6, 0.0f);
  std::vector<float> src{10, 20};
  scatter_add(cpu(), DType::Float32, g, acc.data(), idx.data(), src.data());
  EXPECT_EQ(acc, (std::vector<float>{0, 0, 10, 20, 0, 0}));
  idx[1] = 3;
  EXPECT_THROW(gather(cpu(), DType::Float32, g, picked.data(), idx.data(), table.data()), ValueError);
}

TEST(TensorKernelsCpu, MatmulLayoutsAndBroadcastBatch) {
  const std::int64_t m = 3, k = 4, n = 2;
  std::vector<float> a(m * k), b(k * n);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>(i % 5) - 2;
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>(i % 3) + 0.5f;
  // a stored transposed ([k, m] row-major) and read as [m, k] with strides (1, m); b shared by
  // a batch of 2 through batch stride 0.
  std::vector<float> at(k * m);
  for (int i = 0; i < m; ++i) for (int j = 0; j < k; ++j) at[j * m + i] = a[i * k + j];
  MatmulGeometry g{2, m, k, n, 0, 1, m, 0, n, 1};
  std::vector<float> out(2 * m * n);
  matmul(cpu(), DType::Float32, g, out.data(), at.data(), b.data());
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        float want = 0;
        for (int q = 0; q < k; ++q) want += a[i * k + q] * b[q * n + j];
        EXPECT_FLOAT_EQ(out[(p * m + i) * n + j], want);
      }
  EXPECT_FALSE(matmul_operand_ok(3, 4, 0, 1));   // a broadcast row: needs a copy first
  EXPECT_FALSE(matmul_operand_ok(3, 4, 8, 2));   // no unit stride
  EXPECT_THROW(matmul(cpu(), DType::Int64, g, out.data(), at.data(), b.data()), DTypeError);
}

TEST(TensorKernelsCpu, RandomFillsAreSeededAndPortable) {
  std::mt19937_64 e1(9), e2(9);
  std::vector<double> x(1001), y(1001);
  fill_normal(cpu(), DType::Float64, x.data(), 1001, 1.0, 2.0, e1);
  fill_normal(cpu(), DType::Float64, y.data(), 1001, 1.0, 2.0, e2);
  EXPECT_EQ(x, y);
  double mean = 0;
  for (double v : x) mean += v;
  EXPECT_NEAR(mean / 1001, 1.0, 0.2);
  std::vector<float> u(1000);
  fill_uniform(cpu(), DType::Float32, u.data(), 1000, 2.0, 4.0, e1);
  for (float v : u) {
    ASSERT_GE(v, 2.0f);
    ASSERT_LT(v, 4.0f);
  }
  EXPECT_THROW(fill_uniform(cpu(), DType::Int64, u.data(), 1, 0, 1, e1), DTypeError);
}

}  // namespace
}  // namespace sublet::ops
