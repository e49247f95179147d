// The column sum (ops/cuda/reduce_columns.cu: sums over the leading dimensions of a row-major
// layout, a bias gradient) against the CPU kernel in float64 on the same inputs, for every dtype,
// through ops::reduce_sum: odd widths and misaligned rows (one element per access), widths of
// whole 16-byte vectors, row strides wider than the columns, one run and many.
// Tolerances: float32 and float64 accumulate in double on both devices: rtol 1e-6 (float32's
// final rounding) and 1e-12. int64: exact. bfloat16 and float16 accumulate in float32: besides the
// final rounding to 16 bits, each output may be off by (additions on one element's path) * 2^-24 *
// sum |x|, the path being a run's rows / 8 per thread, 8 row lanes and the runs (reduce_plan.h).
#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "cuda_test_support.h"
#include "half_test_support.h"
#include "ops/cuda/reduce_plan.h"
#include "ops/reduce.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;
using sublet::ops::cuda::column_launch;
using sublet::ops::cuda::ColumnLaunch;
using sublet::ops::cuda::kRowLanes;

namespace {

struct Case {
  std::int64_t rows, cols, row_stride;
  std::int64_t offset = 0;  // elements before the first row (moves the base off 16 bytes)
  const char* what;
};

// Rows, columns and strides that take every branch: vectors or single elements, one run or many.
const Case kCases[] = {
    {16384, 24, 24, 0, "16384 x 24 (many runs)"},
    {1000, 768, 768, 0, "1000 x 768"},
    {333, 7, 7, 0, "333 x 7 (odd width)"},
    {129, 100, 104, 0, "129 x 100 in rows of 104"},
    {77, 64, 64, 1, "77 x 64 off the 16-byte boundary"},
    {2, 3, 3, 0, "2 x 3"},
    {70, 4099, 4099, 0, "70 x 4099 (several column blocks, odd)"},
};

ReduceGeometry geometry_of(const Case& c) { return {{c.cols}, {1}, {c.rows}, {c.row_stride}}; }

std::int64_t input_elements(const Case& c) { return c.offset + (c.rows - 1) * c.row_stride + c.cols; }

template <typename T>
std::vector<double> reference_sums(const std::vector<T>& input, const Case& c, double scale, bool magnitudes) {
  std::vector<double> wide(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) {
    const double v = static_cast<double>(static_cast<float>(input[i]));
    wide[i] = magnitudes ? std::abs(v) : v;
  }
  std::vector<double> out(static_cast<std::size_t>(c.cols));
  reduce_sum(Context::for_device(Device::cpu()), DType::Float64, geometry_of(c), out.data(), wide.data() + c.offset,
             scale);
  return out;
}

template <typename T>
void check_wide(const Case& c, double scale, double rtol, std::uint64_t seed) {
  const auto input = random_values<T>(input_elements(c), seed, -2, 2);
  std::vector<double> wide(input.begin(), input.end());
  std::vector<double> expected(static_cast<std::size_t>(c.cols));
  reduce_sum(Context::for_device(Device::cpu()), DType::Float64, geometry_of(c), expected.data(), wide.data() + c.offset,
             scale);
  DeviceBuffer<T> in(input), out(static_cast<std::size_t>(c.cols));
  reduce_sum(gpu_context(), DTypeOf<T>::value, geometry_of(c), out.get(), in.get() + c.offset, scale);
  const std::vector<T> got = out.download();
  std::vector<T> want(expected.begin(), expected.end());
  expect_close(got, want, rtol, rtol, std::string(c.what) + " " + dtype_name(DTypeOf<T>::value));
}

template <typename H>
void check_half(const Case& c, double scale, std::uint64_t seed) {
  const std::vector<H> input = to_half<H>(random_values<float>(input_elements(c), seed, -2, 2));
  const std::vector<double> exact = reference_sums(input, c, scale, false);
  const std::vector<double> abs_sums = reference_sums(input, c, scale, true);
  const ColumnLaunch launch = column_launch(c.rows, c.cols, 1);  // the longest path of any width
  const double path = static_cast<double>(launch.rows_per_split / kRowLanes + 1 + kRowLanes + launch.splits);
  std::vector<float> reference(exact.begin(), exact.end());
  std::vector<double> allowance(abs_sums.size());
  for (std::size_t i = 0; i < abs_sums.size(); ++i) allowance[i] = path * 0x1p-24 * abs_sums[i];
  DeviceBuffer<H> in(input), out(static_cast<std::size_t>(c.cols));
  reduce_sum(gpu_context(), DTypeOf<H>::value, geometry_of(c), out.get(), in.get() + c.offset, scale);
  expect_half_close(out.download(), reference, HalfTolerance<H>::rounding_rtol, HalfTolerance<H>::rounding_atol,
                    std::string(c.what) + " " + dtype_name(DTypeOf<H>::value), allowance);
}

}  // namespace

TEST(CudaColumnSum, Float32AndFloat64MatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("column sums of float32/float64 against the CPU");
  std::uint64_t seed = 1;
  for (const Case& c : kCases) {
    check_wide<float>(c, 1.0, 1e-6, seed++);
    check_wide<double>(c, 1.0, 1e-12, seed++);
    check_wide<float>(c, 1.0 / static_cast<double>(c.rows), 1e-6, seed++);  // a mean
  }
}

TEST(CudaColumnSum, SixteenBitTypesMatchTheCpuWithinTheirAccumulation) {
  SUBLET_SKIP_WITHOUT_GPU("column sums of bfloat16/float16 against the CPU");
  std::uint64_t seed = 100;
  for (const Case& c : kCases) {
    check_half<BFloat16>(c, 1.0, seed++);
    check_half<Float16>(c, 1.0, seed++);
    check_half<BFloat16>(c, 1.0 / static_cast<double>(c.rows), seed++);
  }
}

TEST(CudaColumnSum, Int64IsExact) {
  SUBLET_SKIP_WITHOUT_GPU("column sums of int64 against the CPU");
  for (const Case& c : kCases) {
    std::vector<std::int64_t> input(static_cast<std::size_t>(input_elements(c)));
    for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<std::int64_t>(i * 7919 % 2001) - 1000;
    std::vector<std::int64_t> expected(static_cast<std::size_t>(c.cols));
    reduce_sum(Context::for_device(Device::cpu()), DType::Int64, geometry_of(c), expected.data(),
               input.data() + c.offset, 1.0);
    DeviceBuffer<std::int64_t> in(input), out(static_cast<std::size_t>(c.cols));
    reduce_sum(gpu_context(), DType::Int64, geometry_of(c), out.get(), in.get() + c.offset, 1.0);
    EXPECT_EQ(out.download(), expected) << c.what;
  }
}

TEST(CudaColumnSum, ThreeDimensionalBiasGradientMatchesTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("a [4, 37, 24] bfloat16 gradient summed over its first two dims");
  const std::vector<BFloat16> input = to_half<BFloat16>(random_values<float>(4 * 37 * 24, 7, -1, 1));
  const ReduceGeometry g{{24}, {1}, {4, 37}, {37 * 24, 24}};
  const std::vector<float> wide = to_float(input);
  std::vector<float> reference(24);
  reduce_sum(Context::for_device(Device::cpu()), DType::Float32, g, reference.data(), wide.data(), 1.0);
  DeviceBuffer<BFloat16> in(input), out(24);
  reduce_sum(gpu_context(), DType::BFloat16, g, out.get(), in.get(), 1.0);
  // 148 rows, one run: 19 additions per thread + 8 lanes; |x| <= 1, so sum |x| <= 148.
  std::vector<double> allowance(24, 28 * 0x1p-24 * 148);
  expect_half_close(out.download(), reference, HalfTolerance<BFloat16>::rounding_rtol,
                    HalfTolerance<BFloat16>::rounding_atol, "[4, 37, 24] over dims 0,1", allowance);
}
