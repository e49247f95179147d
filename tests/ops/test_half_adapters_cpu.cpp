// The CPU's bfloat16/float16 kernels (ops/cpu/half_adapters_cpu.h) against the float32 CPU kernel
// run on the same 16-bit inputs (exactly widened), on random data: element-wise ops on strided
// and broadcast views, reductions, matmul with a transposed operand, conv2d and its backwards.
// Tolerance per dtype: the float32 result rounded once to the 16-bit type, so within half an ulp
// of it (2^-8 relative for bfloat16, 2^-11 for float16) plus float32's own difference (1e-6
// relative); a NaN anywhere fails.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/batch_norm.h"
#include "ops/conv2d.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/pooling.h"
#include "ops/reduce.h"
#include "tests/ops/half_test_support.h"

namespace sublet::ops {
namespace {

using testing::HalfTolerance;

Context cpu() { return Context::for_device(Device::cpu()); }

// Random values already representable in H, as float32.
template <typename H>
std::vector<float> random_half_values(std::size_t count, std::uint64_t seed, float low = -2.0f, float high = 2.0f) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(H(dist(engine)));
  return v;
}

template <typename H>
void expect_close(const std::vector<H>& got, const std::vector<float>& reference, const std::string& what) {
  testing::expect_half_close(got, reference, HalfTolerance<H>::rounding_rtol + testing::kFloat32ComputeRtol, 0.0, what);
}

template <typename H>
class HalfAdaptersCpu : public ::testing::Test {};
using HalfTypes = ::testing::Types<BFloat16, Float16>;
TYPED_TEST_SUITE(HalfAdaptersCpu, HalfTypes);

TYPED_TEST(HalfAdaptersCpu, ElementwiseOnTransposedAndBroadcastViews) {
  using H = TypeParam;
  constexpr DType dt = DTypeOf<H>::value;
  const Shape sizes{7, 5};
  // a: [5, 7] read transposed; b: one row [5] broadcast over the 7 rows; c dense.
  const std::vector<float> a = random_half_values<H>(35, 1), b = random_half_values<H>(5, 2, 0.5f, 2.0f),
                           c = random_half_values<H>(35, 3, 0.5f, 2.0f);
  const std::vector<H> ah = testing::to_half<H>(a), bh = testing::to_half<H>(b), ch = testing::to_half<H>(c);
  const Shape a_strides{1, 7}, b_strides{0, 1}, dense{5, 1};
  std::vector<H> out(35);
  std::vector<float> ref(35);

  binary(cpu(), BinaryOp::Sub, dt, sizes, {out.data(), dense}, {ah.data(), a_strides}, {bh.data(), b_strides}, 0.5);
  binary(cpu(), BinaryOp::Sub, DType::Float32, sizes, {ref.data(), dense}, {a.data(), a_strides}, {b.data(), b_strides}, 0.5);
  expect_close(out, ref, "sub");
  binary(cpu(), BinaryOp::Div, dt, sizes, {out.data(), dense}, {ah.data(), a_strides}, {bh.data(), b_strides}, 1.0);
  binary(cpu(), BinaryOp::Div, DType::Float32, sizes, {ref.data(), dense}, {a.data(), a_strides}, {b.data(), b_strides}, 1.0);
  expect_close(out, ref, "div");

  unary(cpu(), UnaryOp::Exp, dt, sizes, {out.data(), dense}, {ah.data(), a_strides}, {});
  unary(cpu(), UnaryOp::Exp, DType::Float32, sizes, {ref.data(), dense}, {a.data(), a_strides}, {});
  expect_close(out, ref, "exp");

  // In place: out aliases the first operand, as addcmul_ does.
  std::vector<H> acc = ch;
  std::vector<float> acc_ref = c;
  ternary(cpu(), TernaryOp::AddCDiv, dt, sizes, {acc.data(), dense}, {acc.data(), dense}, {ah.data(), a_strides},
          {bh.data(), b_strides}, 0.25);
  ternary(cpu(), TernaryOp::AddCDiv, DType::Float32, sizes, {acc_ref.data(), dense}, {acc_ref.data(), dense},
          {a.data(), a_strides}, {b.data(), b_strides}, 0.25);
  expect_close(acc, acc_ref, "addcdiv in place");
}

TYPED_TEST(HalfAdaptersCpu, SumAndMaxOverStridedDimensions) {
  using H = TypeParam;
  constexpr DType dt = DTypeOf<H>::value;
  // in: [4, 6, 9] dense; reduce dims 0 and 2 (outer: dim 1).
  const std::vector<float> x = random_half_values<H>(4 * 6 * 9, 4);
  const std::vector<H> xh = testing::to_half<H>(x);
  ReduceGeometry g;
  g.outer_sizes = {6};
  g.outer_strides = {9};
  g.inner_sizes = {4, 9};
  g.inner_strides = {54, 1};
  std::vector<H> sums(6);
  std::vector<float> sums_ref(6);
  reduce_sum(cpu(), dt, g, sums.data(), xh.data(), 1.0 / 36);
  reduce_sum(cpu(), DType::Float32, g, sums_ref.data(), x.data(), 1.0 / 36);
  expect_close(sums, sums_ref, "mean");

  ReduceGeometry row;  // max along dim 2
  row.outer_sizes = {4, 6};
  row.outer_strides = {54, 9};
  row.inner_sizes = {9};
  row.inner_strides = {1};
  std::vector<H> best(24);
  std::vector<float> best_ref(24);
  std::vector<std::int64_t> at(24), at_ref(24);
  reduce_extremum(cpu(), ExtremumKind::Max, dt, row, best.data(), at.data(), xh.data());
  reduce_extremum(cpu(), ExtremumKind::Max, DType::Float32, row, best_ref.data(), at_ref.data(), x.data());
  expect_close(best, best_ref, "max");
  EXPECT_EQ(at, at_ref);
}

TYPED_TEST(HalfAdaptersCpu, BatchedMatmulWithATransposedAndABroadcastOperand) {
  using H = TypeParam;
  constexpr DType dt = DTypeOf<H>::value;
  MatmulGeometry g;
  g.batch = 3, g.m = 5, g.k = 17, g.n = 6;
  // a: 3 matrices stored as [k, m] (read transposed); b: one [k, n] matrix broadcast.
  g.a_batch_stride = 17 * 5, g.a_row_stride = 1, g.a_col_stride = 5;
  g.b_batch_stride = 0, g.b_row_stride = 6, g.b_col_stride = 1;
  const std::vector<float> a = random_half_values<H>(3 * 17 * 5, 5), b = random_half_values<H>(17 * 6, 6);
  const std::vector<H> ah = testing::to_half<H>(a), bh = testing::to_half<H>(b);
  std::vector<H> out(3 * 5 * 6);
  std::vector<float> ref(3 * 5 * 6);
  matmul(cpu(), dt, g, out.data(), ah.data(), bh.data());
  matmul(cpu(), DType::Float32, g, ref.data(), a.data(), b.data());
  expect_close(out, ref, "matmul");
}

TYPED_TEST(HalfAdaptersCpu, Conv2dForwardAndBothBackwards) {
  using H = TypeParam;
  constexpr DType dt = DTypeOf<H>::value;
  Conv2dShape s;
  s.batch = 2, s.in_channels = 4, s.in_height = 7, s.in_width = 6;
  s.out_channels = 6, s.kernel_h = 3, s.kernel_w = 3, s.stride_h = 2, s.pad_h = 1, s.pad_w = 1, s.groups = 2;
  s.validate();
  const std::vector<float> x = random_half_values<H>(s.input_numel(), 7), w = random_half_values<H>(s.weight_numel(), 8),
                           bias = random_half_values<H>(s.out_channels, 9),
                           gy = random_half_values<H>(s.output_numel(), 10);
  const std::vector<H> xh = testing::to_half<H>(x), wh = testing::to_half<H>(w), bh = testing::to_half<H>(bias),
                       gyh = testing::to_half<H>(gy);
  std::vector<H> y(s.output_numel()), gx(s.input_numel()), gw(s.weight_numel()), gb(s.out_channels);
  std::vector<float> y_ref(y.size()), gx_ref(gx.size()), gw_ref(gw.size()), gb_ref(gb.size());
  conv2d_forward(cpu(), s, dt, xh.data(), wh.data(), bh.data(), y.data());
  conv2d_forward(cpu(), s, DType::Float32, x.data(), w.data(), bias.data(), y_ref.data());
  expect_close(y, y_ref, "conv2d forward");
  conv2d_backward_input(cpu(), s, dt, gyh.data(), wh.data(), gx.data());
  conv2d_backward_input(cpu(), s, DType::Float32, gy.data(), w.data(), gx_ref.data());
  expect_close(gx, gx_ref, "conv2d backward input");
  conv2d_backward_weight(cpu(), s, dt, gyh.data(), xh.data(), gw.data(), gb.data());
  conv2d_backward_weight(cpu(), s, DType::Float32, gy.data(), x.data(), gw_ref.data(), gb_ref.data());
  expect_close(gw, gw_ref, "conv2d backward weight");
  expect_close(gb, gb_ref, "conv2d backward bias");
  // Without a bias gradient (grad_bias null) the weight gradient is the same.
  std::vector<H> gw_only(gw.size());
  conv2d_backward_weight(cpu(), s, dt, gyh.data(), xh.data(), gw_only.data(), nullptr);
  testing::expect_half_bits_equal(gw_only, gw, "conv2d backward weight without bias");
}

// Batch norm with a 16-bit input and float32 parameters, running statistics and saved
// statistics (the 16-bit contract of ops/batch_norm_kernels.h); the float32 results (statistics,
// parameter gradients) equal the float32 kernel's on the same inputs up to float32 rounding.
TYPED_TEST(HalfAdaptersCpu, BatchNormTrainingWithFloat32ParametersAndItsBackward) {
  using H = TypeParam;
  constexpr DType dt = DTypeOf<H>::value;
  BatchNormShape s;
  s.batch = 3, s.channels = 4, s.height = 5, s.width = 2;
  const std::vector<float> x = random_half_values<H>(s.numel(), 21), gy = random_half_values<H>(s.numel(), 22);
  const std::vector<float> weight = random_half_values<H>(4, 23, 0.5f, 1.5f), bias = random_half_values<H>(4, 24);
  const std::vector<H> xh = testing::to_half<H>(x), gyh = testing::to_half<H>(gy);
  std::vector<float> rm(4, 0.1f), rv(4, 1.0f), rm_ref = rm, rv_ref = rv, mean(4), invstd(4), mean_ref(4), invstd_ref(4);
  std::vector<H> y(s.numel()), gx(s.numel());
  std::vector<float> y_ref(s.numel()), gx_ref(s.numel()), gw(4), gb(4), gw_ref(4), gb_ref(4);
  batch_norm_forward_training(cpu(), s, dt, xh.data(), weight.data(), bias.data(), rm.data(), rv.data(), 0.1, 1e-5,
                              y.data(), mean.data(), invstd.data());
  batch_norm_forward_training(cpu(), s, DType::Float32, x.data(), weight.data(), bias.data(), rm_ref.data(),
                              rv_ref.data(), 0.1, 1e-5, y_ref.data(), mean_ref.data(), invstd_ref.data());
  expect_close(y, y_ref, "batch norm output");
  testing::expect_float_bits_equal(mean, mean_ref, "saved mean");
  testing::expect_float_bits_equal(invstd, invstd_ref, "saved invstd");
  testing::expect_float_bits_equal(rv, rv_ref, "running var");
  batch_norm_backward_training(cpu(), s, dt, gyh.data(), xh.data(), weight.data(), mean.data(), invstd.data(),
                               gx.data(), gw.data(), gb.data());
  batch_norm_backward_training(cpu(), s, DType::Float32, gy.data(), x.data(), weight.data(), mean_ref.data(),
                               invstd_ref.data(), gx_ref.data(), gw_ref.data(), gb_ref.data());
  expect_close(gx, gx_ref, "batch norm grad input");
  testing::expect_float_bits_equal(gw, gw_ref, "batch norm grad weight");
  testing::expect_float_bits_equal(gb, gb_ref, "batch norm grad bias");
}

TYPED_TEST(HalfAdaptersCpu, MaxAndAveragePoolingForwardAndBackward) {
  using H = TypeParam;
  constexpr DType dt = DTypeOf<H>::value;
  Pool2dShape s;
  s.batch = 2, s.channels = 3, s.in_height = 7, s.in_width = 6, s.kernel_h = 3, s.kernel_w = 3;
  s.stride_h = 2, s.stride_w = 2, s.pad_h = 1, s.pad_w = 1;
  s.validate("pool");
  const std::vector<float> x = random_half_values<H>(s.input_numel(), 31), gy = random_half_values<H>(s.output_numel(), 32);
  const std::vector<H> xh = testing::to_half<H>(x), gyh = testing::to_half<H>(gy);
  std::vector<H> y(s.output_numel()), gx(s.input_numel());
  std::vector<float> y_ref(y.size()), gx_ref(gx.size());
  std::vector<std::int64_t> at(y.size()), at_ref(y.size());
  max_pool2d_forward(cpu(), s, dt, xh.data(), y.data(), at.data());
  max_pool2d_forward(cpu(), s, DType::Float32, x.data(), y_ref.data(), at_ref.data());
  expect_close(y, y_ref, "max pool");
  EXPECT_EQ(at, at_ref);
  max_pool2d_backward(cpu(), s, dt, gyh.data(), at.data(), gx.data());
  max_pool2d_backward(cpu(), s, DType::Float32, gy.data(), at_ref.data(), gx_ref.data());
  expect_close(gx, gx_ref, "max pool backward");
  avg_pool2d_forward(cpu(), s, dt, xh.data(), y.data(), false);
  avg_pool2d_forward(cpu(), s, DType::Float32, x.data(), y_ref.data(), false);
  expect_close(y, y_ref, "avg pool");
  avg_pool2d_backward(cpu(), s, dt, gyh.data(), gx.data(), false);
  avg_pool2d_backward(cpu(), s, DType::Float32, gy.data(), gx_ref.data(), false);
  expect_close(gx, gx_ref, "avg pool backward");
}

// The scratch buffers are the allocator's workspaces: they show in its statistics and are all
// returned when the kernel ends.
TYPED_TEST(HalfAdaptersCpu, ScratchBuffersAreWorkspacesOfTheAllocator) {
  using H = TypeParam;
  auto& allocator = memory::allocator_for(Device::cpu());
  const std::vector<H> a = testing::to_half<H>(random_half_values<H>(4096, 11));
  std::vector<H> out(4096);
  const std::int64_t allocations_before = allocator.stats().allocation[memory::StatType::All].allocated;
  const std::int64_t allocated_before = allocator.stats().allocated_bytes[memory::StatType::All].current;
  unary(cpu(), UnaryOp::Relu, DTypeOf<H>::value, {4096}, {out.data(), {1}}, {a.data(), {1}}, {});
  EXPECT_GE(allocator.stats().allocation[memory::StatType::All].allocated - allocations_before, 2)
      << "input and output scratch";
  EXPECT_EQ(allocator.stats().allocated_bytes[memory::StatType::All].current, allocated_before);
}

}  // namespace
}  // namespace sublet::ops
