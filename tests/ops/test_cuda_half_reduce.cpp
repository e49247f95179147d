// Reductions of bfloat16 and float16 on the GPU (ops/cuda/reduce.cu) against the float32 CPU
// kernels on the same inputs. The output has the input's dtype, as PyTorch's sum and mean of a
// 16-bit tensor.
// Sum and mean accumulate in float32 on the GPU (the CPU reference in double): besides the one
// rounding to 16 bits (2^-8 of the value for bfloat16, 2^-11 for float16; tests/ops/
// half_test_support.h), each output may be off by the float32 accumulation error, at most
// (additions on one element's path) * 2^-24 * sum |x|: a thread adds inner/256 of the elements
// (per-block kernel; at most 32 in the per-thread one), then 8 tree levels and at most the
// chunks of the two-pass path, so (inner/256 + 64) * 2^-24 * sum |x| bounds it for every size here.
// max/min: the value is an input element (compared in float32), exact; its index exact.
// scatter_add: one float32 addition rounded to 16 bits per index, so one rounding per addition;
// gather: exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/errors.h"
#include "core/half.h"
#include "cuda_test_support.h"
#include "half_test_support.h"
#include "ops/reduce.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Each output's accumulation allowance: (inner/256 + 64) * 2^-24 * sum |x| * scale over the
// elements it reduces (0 where that sum is not finite: the reference is not finite either).
std::vector<double> sum_allowance(const std::vector<float>& input, const ReduceGeometry& g, double scale) {
  const std::int64_t outputs = shape_numel(g.outer_sizes), inner = shape_numel(g.inner_sizes);
  std::vector<float> magnitudes(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) magnitudes[i] = std::abs(input[i]);
  std::vector<double> abs_sums(static_cast<std::size_t>(outputs));
  // The CPU float32 sum of |x| over the same geometry (double accumulation, one float rounding).
  std::vector<float> sums(static_cast<std::size_t>(outputs));
  reduce_sum(Context::for_device(Device::cpu()), DType::Float32, g, sums.data(), magnitudes.data(), 1.0);
  const double paths = static_cast<double>(inner / 256 + 64);
  for (std::size_t o = 0; o < sums.size(); ++o) {
    const double bound = paths * 0x1p-24 * static_cast<double>(sums[o]) * scale;
    abs_sums[o] = std::isfinite(bound) ? bound : 0.0;
  }
  return abs_sums;
}

template <typename H>
void check_sum(const std::vector<float>& values, const ReduceGeometry& g, double scale, const std::string& name) {
  const std::string what = name + " " + dtype_name(DTypeOf<H>::value);
  const std::vector<H> input = to_half<H>(values);
  const std::vector<float> input_f = to_float(input);
  const std::int64_t outputs = shape_numel(g.outer_sizes);
  std::vector<float> reference(static_cast<std::size_t>(outputs));
  reduce_sum(Context::for_device(Device::cpu()), DType::Float32, g, reference.data(), input_f.data(), scale);
  DeviceBuffer<H> in(input), out(static_cast<std::size_t>(outputs));
  reduce_sum(gpu_context(), DTypeOf<H>::value, g, out.get(), in.get(), scale);
  expect_half_close(out.download(), reference, HalfTolerance<H>::rounding_rtol + kFloat32ComputeRtol,
                    HalfTolerance<H>::rounding_atol, what, sum_allowance(input_f, g, scale));
}

template <typename H>
void check_sums() {
  // [8, 50, 3]: the middle dim (strided, per-block), the outer two (per-block, 400), the last
  // (3: per-thread), all of them.
  const auto v = random_values<float>(8 * 50 * 3, 1, -2, 2);
  check_sum<H>(v, {{8, 3}, {150, 1}, {50}, {3}}, 1.0, "sum over dim 1");
  check_sum<H>(v, {{3}, {1}, {8, 50}, {150, 3}}, 1.0 / 400, "mean over dims 0,1");
  check_sum<H>(v, {{8, 50}, {150, 3}, {3}, {1}}, 1.0, "sum over dim 2");
  check_sum<H>(v, {{}, {}, {8, 50, 3}, {150, 3, 1}}, 1.0 / 1200, "mean of all");
  // Long reductions: the chunked two-pass path (> 65536 elements, few outputs).
  const std::int64_t n = 1 << 17;
  const auto long_values = random_values<float>(n, 3, -1, 1);
  check_sum<H>(long_values, {{}, {}, {n}, {1}}, 1.0 / n, "mean of 2^17");
  check_sum<H>(long_values, {{}, {}, {n}, {1}}, 1.0, "sum of 2^17");
  check_sum<H>(long_values, {{2}, {n / 2}, {n / 2}, {1}}, 1.0, "two sums of 2^16");
  // Positive values: a sum (about 49,000) that 16-bit accumulation would stall far below, kept
  // well under float16's overflow (65,520), so that reference and kernel cannot straddle it.
  const auto positive = random_values<float>(n, 4, 0.25, 0.5);
  check_sum<H>(positive, {{}, {}, {n}, {1}}, 1.0, "sum of 2^17 positive");
  check_sum<H>(positive, {{}, {}, {n}, {1}}, 1.0 / n, "mean of 2^17 positive");
}

TEST(CudaHalfReduce, BFloat16SumAndMeanMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 sum/mean against the float32 CPU kernel");
  check_sums<BFloat16>();
}

TEST(CudaHalfReduce, Float16SumAndMeanMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("float16 sum/mean against the float32 CPU kernel");
  check_sums<Float16>();
}

// Rows of 64 (the per-block kernel; the first 20 of each row: the per-thread one) with NaN,
// infinities, subnormals and a row whose sum overflows the 16-bit type.
template <typename H>
void check_special_sums() {
  const std::int64_t rows = 6, cols = 64;
  std::vector<float> v = random_values<float>(rows * cols, 5, -1, 1);
  v[0 * cols + 7] = kNaN;                                   // row 0: NaN
  v[1 * cols + 3] = kInf;                                   // row 1: +inf
  v[2 * cols + 1] = kInf;                                   // row 2: inf - inf = NaN
  v[2 * cols + 9] = -kInf;
  const float big = std::is_same_v<H, Float16> ? 60000.0f : 3.0e38f;  // row 3: the sum overflows H
  for (std::int64_t c = 0; c < cols; ++c) v[3 * cols + c] = big;
  H tiny;
  tiny.bits = 0x0001;                                       // row 4: subnormals only
  for (std::int64_t c = 0; c < cols; ++c) v[4 * cols + c] = static_cast<float>(tiny) * static_cast<float>(c % 3);
  // Row 5 stays random.
  check_sum<H>(v, {{rows}, {cols}, {cols}, {1}}, 1.0, "row sums with NaN/inf/overflow/subnormals");
  check_sum<H>(v, {{rows}, {cols}, {20}, {1}}, 1.0, "per-thread row sums (20 of 64)");
  // The mean of float16's row 3 is 60000 again (its float32 sum did not overflow). bfloat16's
  // row 3 overflows float32 itself, which the double-accumulating reference does not: float32
  // accumulation (PyTorch's too) gives inf for that mean, so its mean row holds 1e36 instead.
  if constexpr (std::is_same_v<H, BFloat16>) {
    for (std::int64_t c = 0; c < cols; ++c) v[3 * cols + c] = 1.0e36f;
  }
  check_sum<H>(v, {{rows}, {cols}, {cols}, {1}}, 1.0 / cols, "row means with NaN/inf/large/subnormals");
}

TEST(CudaHalfReduce, NaNInfinityOverflowAndSubnormalsPropagateAsInFloat32) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit sums of special values");
  check_special_sums<BFloat16>();
  check_special_sums<Float16>();
}

template <typename H>
void check_extremum(ExtremumKind kind, std::int64_t rows, const std::string& name) {
  // Along the rows of a [rows, 6] tensor viewed transposed (stride 6): ties, NaN, infinities.
  const std::int64_t cols = 6;
  std::vector<float> v = random_values<float>(rows * cols, 4, -2, 2);
  for (std::int64_t r = 0; r < rows; ++r) v[r * cols + 1] = std::round(v[r * cols + 1] * 2);  // many ties
  v[3 * cols + 2] = kNaN;  // column 2: the first NaN wins
  v[5 * cols + 2] = kNaN;
  v[4 * cols + 3] = kInf;
  v[2 * cols + 4] = -kInf;
  const std::vector<H> input = to_half<H>(v);
  const std::vector<float> input_f = to_float(input);  // many values tie after rounding, too
  const ReduceGeometry g{{cols}, {1}, {rows}, {cols}};
  std::vector<float> ref_values(cols);
  std::vector<std::int64_t> ref_indices(cols);
  reduce_extremum(Context::for_device(Device::cpu()), kind, DType::Float32, g, ref_values.data(), ref_indices.data(),
                  input_f.data());
  DeviceBuffer<H> in(input), values(cols);
  DeviceBuffer<std::int64_t> indices(cols);
  reduce_extremum(gpu_context(), kind, DTypeOf<H>::value, g, values.get(), indices.get(), in.get());
  const std::string what = name + " " + dtype_name(DTypeOf<H>::value) + " " + std::to_string(rows) + " rows";
  expect_half_close(values.download(), ref_values, 0.0, 0.0, what + " values");  // exact
  expect_equal(indices.download(), ref_indices, what + " indices");
}

TEST(CudaHalfReduce, MaxMinFirstIndexAndNaNMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit max/min against the float32 CPU kernel");
  for (std::int64_t rows : {7, 1000}) {  // per-thread and per-block kernels
    check_extremum<BFloat16>(ExtremumKind::Max, rows, "max");
    check_extremum<BFloat16>(ExtremumKind::Min, rows, "min");
    check_extremum<Float16>(ExtremumKind::Max, rows, "max");
    check_extremum<Float16>(ExtremumKind::Min, rows, "min");
  }
}

template <typename H>
void check_gather_scatter() {
  // out [4, 9]; indices/src [4, 5] index dim 1, with repeats so that scatter_add accumulates.
  const std::int64_t rows = 4, width = 9, count = 5;
  std::vector<std::int64_t> idx(rows * count);
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i * 7 % 3 + i % 4);
  const ScatterGeometry g{{rows}, {width}, 1, width, count, {count, 1}, {count, 1}};
  std::vector<float> src_values = random_values<float>(rows * count, 6);
  src_values[2] = kNaN;
  const std::vector<H> src = to_half<H>(src_values), base = to_half<H>(random_values<float>(rows * width, 7));
  const std::vector<float> src_f = to_float(src), base_f = to_float(base);
  const std::string name = dtype_name(DTypeOf<H>::value);

  std::vector<float> reference = base_f;
  scatter_add(Context::for_device(Device::cpu()), DType::Float32, g, reference.data(), idx.data(), src_f.data());
  DeviceBuffer<H> out(base), source(src);
  DeviceBuffer<std::int64_t> indices(idx);
  scatter_add(gpu_context(), DTypeOf<H>::value, g, out.get(), indices.get(), source.get());
  // Each addition rounds: allow one rounding per addition of |base| + the |src| added so far.
  std::vector<double> allowance(reference.size(), 0.0);
  std::vector<double> magnitude(reference.size());
  std::vector<int> additions(reference.size(), 0);
  for (std::size_t i = 0; i < base_f.size(); ++i) magnitude[i] = std::abs(base_f[i]);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < count; ++j) {
      const std::size_t target = static_cast<std::size_t>(r * width + idx[r * count + j]);
      magnitude[target] += std::abs(src_f[r * count + j]);
      ++additions[target];
    }
  }
  for (std::size_t i = 0; i < allowance.size(); ++i) {
    const double a = additions[i] * (HalfTolerance<H>::rounding_rtol + kFloat32ComputeRtol) * magnitude[i];
    allowance[i] = std::isfinite(a) ? a : 0.0;
  }
  expect_half_close(out.download(), reference, 0.0, HalfTolerance<H>::rounding_atol, "scatter_add " + name, allowance);

  std::vector<float> gathered_ref(rows * count);
  gather(Context::for_device(Device::cpu()), DType::Float32, g, gathered_ref.data(), idx.data(), base_f.data());
  DeviceBuffer<H> in(base), gathered(rows * count);
  gather(gpu_context(), DTypeOf<H>::value, g, gathered.get(), indices.get(), in.get());
  expect_half_close(gathered.download(), gathered_ref, 0.0, 0.0, "gather " + name);  // exact

  idx[6] = width;  // one past the end
  indices.upload(idx);
  EXPECT_THROW(gather(gpu_context(), DTypeOf<H>::value, g, gathered.get(), indices.get(), in.get()), ValueError);
  EXPECT_THROW(scatter_add(gpu_context(), DTypeOf<H>::value, g, out.get(), indices.get(), source.get()), ValueError);
}

TEST(CudaHalfReduce, GatherAndScatterAddMatchTheFloat32Cpu) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit gather/scatter_add against the float32 CPU kernels");
  check_gather_scatter<BFloat16>();
  check_gather_scatter<Float16>();
}

}  // namespace
