// The host-side choice of the column-sum kernel (ops/cuda/reduce_plan.h): which reductions are
// sums over the leading dimensions of a row-major layout, and how the rows are cut into runs.
// Runs without a GPU; tests/ops/test_cuda_column_sum.cpp checks the kernel against the CPU.
#include <gtest/gtest.h>

#include "ops/cuda/reduce_plan.h"

namespace sublet::ops::cuda {
namespace {

TEST(ReducePlan, BiasGradientOfABatchedLinearIsAColumnSum) {
  // [16, 1024, 768] contiguous summed over dims 0 and 1.
  const ColumnPlan plan = plan_columns({{768}, {1}, {16, 1024}, {1024 * 768, 768}});
  ASSERT_TRUE(plan.applies);
  EXPECT_EQ(plan.rows, 16 * 1024);
  EXPECT_EQ(plan.cols, 768);
  EXPECT_EQ(plan.row_stride, 768);
}

TEST(ReducePlan, KeptDimensionsMustFormOneDenseRun) {
  // Two kept dims [3, 5] contiguous after the reduced one: one run of 15.
  const ColumnPlan two = plan_columns({{3, 5}, {5, 1}, {7}, {15}});
  ASSERT_TRUE(two.applies);
  EXPECT_EQ(two.cols, 15);
  EXPECT_EQ(two.row_stride, 15);
  // Kept columns two apart, or the kept dims in the other order: not dense.
  EXPECT_FALSE(plan_columns({{8}, {2}, {9}, {16}}).applies);
  EXPECT_FALSE(plan_columns({{3, 5}, {1, 3}, {7}, {15}}).applies);
  // A reduction along the last dimension (the kept one strided) is the generic kernels' case.
  EXPECT_FALSE(plan_columns({{8}, {5}, {5}, {1}}).applies);
}

TEST(ReducePlan, ReducedDimensionsMustFormOneRun) {
  // A row stride wider than the columns (a narrowed view) is fine: the rows are one run.
  const ColumnPlan narrowed = plan_columns({{100}, {1}, {4, 33}, {33 * 104, 104}});
  ASSERT_TRUE(narrowed.applies);
  EXPECT_EQ(narrowed.rows, 132);
  EXPECT_EQ(narrowed.row_stride, 104);
  // Reduced dims that do not step over each other (a gap between the outer ones) are not.
  EXPECT_FALSE(plan_columns({{100}, {1}, {4, 33}, {33 * 104 + 8, 104}}).applies);
}

TEST(ReducePlan, SizeOneDimensionsAreIgnored) {
  const ColumnPlan plan = plan_columns({{1, 24, 1}, {999, 1, 7}, {6, 1, 5}, {120, 3, 24}});
  ASSERT_TRUE(plan.applies);
  EXPECT_EQ(plan.rows, 30);
  EXPECT_EQ(plan.cols, 24);
  EXPECT_EQ(plan.row_stride, 24);
}

TEST(ReducePlan, OneRowOrOneColumnTakesTheGenericKernels) {
  EXPECT_FALSE(plan_columns({{1}, {1}, {50}, {1}}).applies);  // a full sum of a vector
  EXPECT_FALSE(plan_columns({{50}, {1}, {1}, {50}}).applies);  // nothing reduced
  EXPECT_FALSE(plan_columns({{}, {}, {8, 50}, {50, 1}}).applies);
}

TEST(ReducePlan, LaunchCoversEveryRowOnceWithRunsOfAtLeastTheMinimum) {
  for (const std::int64_t rows : {2, 63, 64, 65, 1000, 16384, 1000003}) {
    for (const std::int64_t cols : {2, 7, 768, 3072, 100000}) {
      for (const int width : {1, 4, 8}) {
        const ColumnLaunch launch = column_launch(rows, cols, width);
        const std::string what = std::to_string(rows) + " x " + std::to_string(cols) + " / " + std::to_string(width);
        EXPECT_EQ(launch.column_blocks, (cols + 32 * width - 1) / (32 * width)) << what;
        EXPECT_GE(launch.splits * launch.rows_per_split, rows) << what;
        EXPECT_LT((launch.splits - 1) * launch.rows_per_split, rows) << what;  // no empty run
        if (rows >= kMinRowsPerSplit) {
          EXPECT_GE(launch.rows_per_split, kMinRowsPerSplit) << what;
        }
        EXPECT_LE(launch.splits, 65535) << what;  // gridDim.y
      }
    }
  }
  // The bias gradients of a GPT-2 step: several hundred blocks or more, as many as runs allow.
  const ColumnLaunch small = column_launch(16384, 768, 8);
  EXPECT_EQ(small.column_blocks, 3);
  EXPECT_EQ(small.splits, 256);
  EXPECT_GE(column_launch(16384, 3072, 8).column_blocks * column_launch(16384, 3072, 8).splits, 1000);
}

}  // namespace
}  // namespace sublet::ops::cuda
