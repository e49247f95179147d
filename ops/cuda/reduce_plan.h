#pragma once
// Which sum kernel a reduction takes on the GPU, decided on the host from the geometry. Plain
// C++ (no CUDA) so that the CPU suite tests the choice (tests/ops/test_reduce_plan.cpp).
//
// The column path serves sums over the leading dimensions of a row-major layout (a bias
// gradient: [rows, cols] summed over rows): the kept dimensions form one dense run of `cols`
// elements and the reduced ones one run of `rows` steps of `row_stride`. The generic kernels
// give each output a block that walks its reduced elements `row_stride` apart, so neighbouring
// threads never read neighbouring bytes; the column kernel reads whole rows instead.
#include <cstdint>

#include "ops/reduce.h"

namespace sublet::ops::cuda {

struct ColumnPlan {
  bool applies = false;
  std::int64_t rows = 0, cols = 0, row_stride = 0;
};

namespace detail {

// The sizes and strides of a group of dimensions as one run: true with (count, stride) when
// every dimension of more than one element steps over exactly the ones after it.
inline bool single_run(const Shape& sizes, const Shape& strides, std::int64_t& count, std::int64_t& stride) {
  count = 1;
  stride = 0;
  std::int64_t expected = -1;  // the stride the next dimension outwards must have
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (expected < 0) {
      stride = strides[i];
    } else if (strides[i] != expected) {
      return false;
    }
    count *= sizes[i];
    expected = stride * count;
  }
  return true;
}

}  // namespace detail

inline ColumnPlan plan_columns(const ReduceGeometry& g) {
  ColumnPlan plan;
  if (g.outer_sizes.size() != g.outer_strides.size() || g.inner_sizes.size() != g.inner_strides.size()) return plan;
  std::int64_t cols = 0, col_stride = 0, rows = 0, row_stride = 0;
  if (!detail::single_run(g.outer_sizes, g.outer_strides, cols, col_stride) || col_stride != 1) return plan;
  if (!detail::single_run(g.inner_sizes, g.inner_strides, rows, row_stride)) return plan;
  // One column or one row is a plain contiguous sum or a copy: the generic kernels serve it.
  if (cols < 2 || rows < 2) return plan;
  plan.applies = true;
  plan.rows = rows;
  plan.cols = cols;
  plan.row_stride = row_stride;
  return plan;
}

// The column kernel's launch: a block is 32 threads across (each V consecutive columns) by 8
// down the rows; the rows are cut into `splits` runs of `rows_per_split` so that about
// kColumnTargetBlocks blocks (a few per SM) fill the GPU. Each run gives one partial sum per
// column (the accumulator type), which a second pass adds in order: the result depends on the
// geometry only. Runs keep at least kMinRowsPerSplit rows, so the partials stay small.
inline constexpr int kColumnLanes = 32;
inline constexpr int kRowLanes = 8;
inline constexpr std::int64_t kColumnTargetBlocks = 1024;
inline constexpr std::int64_t kMinRowsPerSplit = 64;

struct ColumnLaunch {
  std::int64_t column_blocks = 1, splits = 1, rows_per_split = 0;
};

inline ColumnLaunch column_launch(std::int64_t rows, std::int64_t cols, int vector_width) {
  ColumnLaunch launch;
  const std::int64_t block_cols = std::int64_t{kColumnLanes} * vector_width;
  launch.column_blocks = (cols + block_cols - 1) / block_cols;
  const std::int64_t wanted = (kColumnTargetBlocks + launch.column_blocks - 1) / launch.column_blocks;
  const std::int64_t most = rows >= kMinRowsPerSplit ? rows / kMinRowsPerSplit : 1;
  const std::int64_t splits = wanted < most ? wanted : most;
  launch.rows_per_split = (rows + splits - 1) / splits;
  launch.splits = (rows + launch.rows_per_split - 1) / launch.rows_per_split;  // no empty run
  return launch;
}

}  // namespace sublet::ops::cuda
