// Reductions on the GPU against the CPU kernels. Sums: float32 results come from double
// accumulators on both devices, so they differ by at most the final rounding plus the
// different summation order of the double partials: rtol 1e-6. float64: rtol 1e-12 (order).
// int64 sums, max/min values and indices, gather and scatter_add: exact.
#include <gtest/gtest.h>

#include <limits>

#include "cuda_test_support.h"
#include "core/errors.h"
#include "ops/reduce.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

// Sums a [A, B, C] tensor (contiguous) over the given geometry on both devices.
template <typename T>
void check_sum(const std::vector<T>& input, const ReduceGeometry& g, double scale, double rtol, const std::string& what) {
  const std::int64_t outputs = shape_numel(g.outer_sizes);
  std::vector<T> cpu_out(outputs);
  reduce_sum(Context::for_device(Device::cpu()), DTypeOf<T>::value, g, cpu_out.data(), input.data(), scale);
  DeviceBuffer<T> in(input), out(outputs);
  reduce_sum(gpu_context(), DTypeOf<T>::value, g, out.get(), in.get(), scale);
  expect_close(out.download(), cpu_out, rtol, rtol, what);  // atol = rtol: sums that cancel to ~0
}

}  // namespace

TEST(CudaReduce, SumAndMeanOverAnyDimsMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("sum/mean kernels against the CPU");
  // [8, 50, 3]: reduce the middle dim (strided), the outer two (per-thread path), the last.
  const auto f = random_values<float>(8 * 50 * 3, 1);
  const auto d = random_values<double>(8 * 50 * 3, 2);
  const ReduceGeometry middle{{8, 3}, {150, 1}, {50}, {3}};
  const ReduceGeometry outer_two{{3}, {1}, {8, 50}, {150, 3}};
  const ReduceGeometry last{{8, 50}, {150, 3}, {3}, {1}};
  check_sum(f, middle, 1.0, 1e-6, "float sum over dim 1");
  check_sum(f, outer_two, 1.0 / 400, 1e-6, "float mean over dims 0,1");
  check_sum(f, last, 1.0, 1e-6, "float sum over dim 2");
  check_sum(d, middle, 1.0, 1e-12, "double sum over dim 1");
  check_sum(d, outer_two, 1.0 / 400, 1e-12, "double mean over dims 0,1");
  std::vector<std::int64_t> ints(8 * 50 * 3);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<std::int64_t>(i * 7919 % 1000) - 500;
  check_sum(ints, middle, 1.0, 0.0, "int64 sum over dim 1");
}

TEST(CudaReduce, LongSumSplitsIntoChunksAndMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("chunked sum of a long reduction");
  const std::int64_t n = 300000;  // > 65536 with one output: the chunked two-pass path
  const auto f = random_values<float>(n, 3);
  check_sum(f, ReduceGeometry{{}, {}, {n}, {1}}, 1.0 / n, 1e-6, "mean of 300000 floats");
  check_sum(f, ReduceGeometry{{2}, {n / 2}, {n / 2}, {1}}, 1.0, 1e-6, "two sums of 150000 floats");
}

template <typename T>
void check_extremum(ExtremumKind kind, const std::vector<T>& input, std::int64_t rows, std::int64_t cols,
                    const std::string& what) {
  // Reduce along rows of a [rows, cols] tensor viewed transposed: dim stride cols.
  const ReduceGeometry g{{cols}, {1}, {rows}, {cols}};
  std::vector<T> cpu_values(cols);
  std::vector<std::int64_t> cpu_indices(cols);
  reduce_extremum(Context::for_device(Device::cpu()), kind, DTypeOf<T>::value, g, cpu_values.data(),
                  cpu_indices.data(), input.data());
  DeviceBuffer<T> in(input), values(cols);
  DeviceBuffer<std::int64_t> indices(cols);
  reduce_extremum(gpu_context(), kind, DTypeOf<T>::value, g, values.get(), indices.get(), in.get());
  expect_equal(values.download(), cpu_values, what + " values");
  expect_equal(indices.download(), cpu_indices, what + " indices");
}

TEST(CudaReduce, MaxMinFirstIndexAndNanMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("max/min/argmax kernels against the CPU");
  for (std::int64_t rows : {7, 1000}) {  // per-thread and per-block kernels
    const std::int64_t cols = 6;
    auto f = random_values<float>(rows * cols, 4);
    for (std::int64_t r = 0; r < rows; ++r) f[r * cols + 1] = std::round(f[r * cols + 1] * 2);  // many ties
    f[3 * cols + 2] = std::numeric_limits<float>::quiet_NaN();  // column 2: the first NaN wins
    f[5 * cols + 2] = std::numeric_limits<float>::quiet_NaN();
    const std::string label = std::to_string(rows) + " rows";
    check_extremum(ExtremumKind::Max, f, rows, cols, "float max " + label);
    check_extremum(ExtremumKind::Min, f, rows, cols, "float min " + label);
    std::vector<std::int64_t> ints(rows * cols);
    for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<std::int64_t>(i * 31 % 17);
    check_extremum(ExtremumKind::Max, ints, rows, cols, "int64 max " + label);
    check_extremum(ExtremumKind::Min, random_values<double>(rows * cols, 5), rows, cols, "double min " + label);
  }
}

TEST(CudaReduce, GatherAndScatterAddMatchCpuAndCheckIndices) {
  SUBLET_SKIP_WITHOUT_GPU("gather/scatter_add kernels");
  // out [4, 9]; indices/src [4, 5] index dim 1 (with repeats, so scatter_add accumulates).
  const std::int64_t rows = 4, width = 9, count = 5;
  std::vector<std::int64_t> idx(rows * count);
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i * 7 % 3 + i % 4);
  const ScatterGeometry g{{rows}, {width}, 1, width, count, {count, 1}, {count, 1}};
  const auto src = random_values<float>(rows * count, 6);
  const auto base = random_values<float>(rows * width, 7);
  std::vector<float> cpu_out = base;
  scatter_add(Context::for_device(Device::cpu()), DType::Float32, g, cpu_out.data(), idx.data(), src.data());
  DeviceBuffer<float> out(base), source(src);
  DeviceBuffer<std::int64_t> indices(idx);
  scatter_add(gpu_context(), DType::Float32, g, out.get(), indices.get(), source.get());
  expect_equal(out.download(), cpu_out, "scatter_add");

  std::vector<float> cpu_gathered(rows * count);
  gather(Context::for_device(Device::cpu()), DType::Float32, g, cpu_gathered.data(), idx.data(), base.data());
  DeviceBuffer<float> in(base), gathered(rows * count);
  gather(gpu_context(), DType::Float32, g, gathered.get(), indices.get(), in.get());
  expect_equal(gathered.download(), cpu_gathered, "gather");

  idx[6] = width;  // one past the end
  indices.upload(idx);
  EXPECT_THROW(gather(gpu_context(), DType::Float32, g, gathered.get(), indices.get(), in.get()), ValueError);
  EXPECT_THROW(scatter_add(gpu_context(), DType::Float32, g, out.get(), indices.get(), source.get()), ValueError);
}
