// The host-side choice between the dense (vectorised) and the strided element-wise kernel on the
// GPU (ops/cuda/elementwise_plan.h): which layouts count as dense, which inputs as broadcast
// scalars, and which base addresses force the strided fallback. Runs without a GPU; the kernels
// themselves are checked against the CPU in tests/ops/test_cuda_elementwise.cpp.
#include <gtest/gtest.h>

#include <cstdint>

#include "ops/cuda/elementwise_plan.h"

namespace sublet::ops::cuda {
namespace {

// 16-byte aligned fake addresses (never dereferenced).
alignas(16) float storage[64];
const void* aligned_at(int element) { return &storage[element]; }

TEST(ElementwisePlan, ContiguousOperandsAreDenseWithFullVectors) {
  const Shape sizes{64, 3, 7, 5}, strides{105, 35, 5, 1};
  const auto plan = plan_dense<3>(sizes, {&strides, &strides, &strides},
                                  {aligned_at(0), aligned_at(4), aligned_at(8)}, sizeof(float));
  EXPECT_TRUE(plan.dense);
  EXPECT_EQ(plan.vector_width, 4);
  EXPECT_FALSE(plan.scalar[1]);
  EXPECT_FALSE(plan.scalar[2]);
  EXPECT_EQ((plan_dense<2>(sizes, {&strides, &strides}, {aligned_at(0), aligned_at(0)}, sizeof(double)).vector_width),
            2);
}

TEST(ElementwisePlan, OddElementCountsStayDense) {
  // numel % 4 != 0 is the kernel's scalar tail, not a reason to fall back.
  for (std::int64_t n : {1, 3, 1023, 4097, 4098}) {
    const Shape sizes{n}, strides{1};
    EXPECT_TRUE((plan_dense<2>(sizes, {&strides, &strides}, {aligned_at(0), aligned_at(4)}, 4).dense)) << n;
  }
}

TEST(ElementwisePlan, SameDenseLayoutInAnyDimensionOrderIsDense) {
  // [4, 5] stored transposed (column-major) by every operand: memory order is element order.
  const Shape sizes{4, 5}, transposed{1, 4};
  EXPECT_TRUE((plan_dense<2>(sizes, {&transposed, &transposed}, {aligned_at(0), aligned_at(4)}, 4).dense));
  // Output contiguous, input transposed: element i is not at the same place in both.
  const Shape contiguous{5, 1};
  EXPECT_FALSE((plan_dense<2>(sizes, {&contiguous, &transposed}, {aligned_at(0), aligned_at(4)}, 4).dense));
  EXPECT_FALSE((plan_dense<2>(sizes, {&transposed, &contiguous}, {aligned_at(0), aligned_at(4)}, 4).dense));
}

TEST(ElementwisePlan, SizeOneDimensionsIgnoreTheirStrides) {
  const Shape sizes{1, 6, 1, 8}, a{999, 8, 7, 1}, b{48, 8, 8, 1};
  EXPECT_TRUE((plan_dense<2>(sizes, {&a, &b}, {aligned_at(0), aligned_at(4)}, 4).dense));
  const Shape one{1, 1}, any{3, 17};
  EXPECT_TRUE((plan_dense<2>(one, {&any, &one}, {aligned_at(0), aligned_at(4)}, 4).dense));
}

TEST(ElementwisePlan, GappedOrOverlappingOutputIsNotDense) {
  const Shape sizes{4, 5};
  const Shape every_other{10, 2}, row_padded{8, 1}, broadcast_out{0, 1};
  for (const Shape* out : {&every_other, &row_padded, &broadcast_out}) {
    const Shape contiguous{5, 1};
    EXPECT_FALSE((plan_dense<2>(sizes, {out, &contiguous}, {aligned_at(0), aligned_at(4)}, 4).dense));
  }
}

TEST(ElementwisePlan, OneElementBroadcastInputIsAScalarOnEitherSide) {
  const Shape sizes{33, 65}, dense{65, 1}, scalar{0, 0};
  // A scalar input needs no alignment: it is read as one element.
  const auto right = plan_dense<3>(sizes, {&dense, &dense, &scalar}, {aligned_at(0), aligned_at(4), aligned_at(1)}, 4);
  EXPECT_TRUE(right.dense);
  EXPECT_FALSE(right.scalar[1]);
  EXPECT_TRUE(right.scalar[2]);
  const auto left = plan_dense<3>(sizes, {&dense, &scalar, &dense}, {aligned_at(0), aligned_at(3), aligned_at(8)}, 4);
  EXPECT_TRUE(left.dense);
  EXPECT_TRUE(left.scalar[1]);
  EXPECT_FALSE(left.scalar[2]);
}

TEST(ElementwisePlan, RowOrChannelBroadcastTakesTheStridedKernel) {
  const Shape sizes{3, 4, 5}, dense{20, 5, 1}, per_channel{0, 1, 0}, per_column{0, 0, 1};
  EXPECT_FALSE((plan_dense<3>(sizes, {&dense, &dense, &per_channel}, {aligned_at(0), aligned_at(4), aligned_at(8)}, 4)
                    .dense));
  EXPECT_FALSE((plan_dense<3>(sizes, {&dense, &per_column, &dense}, {aligned_at(0), aligned_at(4), aligned_at(8)}, 4)
                    .dense));
}

TEST(ElementwisePlan, MisalignedDenseOperandTakesTheStridedKernel) {
  const Shape sizes{4097}, strides{1};
  // A view starting one float into its storage (x[1:]), as output or as input.
  EXPECT_FALSE((plan_dense<2>(sizes, {&strides, &strides}, {aligned_at(1), aligned_at(0)}, 4).dense));
  EXPECT_FALSE((plan_dense<3>(sizes, {&strides, &strides, &strides}, {aligned_at(0), aligned_at(4), aligned_at(2)}, 4)
                    .dense));
  // Four floats in is 16 bytes in: aligned again.
  EXPECT_TRUE((plan_dense<2>(sizes, {&strides, &strides}, {aligned_at(4), aligned_at(8)}, 4).dense));
}

TEST(ElementwisePlan, MismatchedStrideCountIsLeftToTheStridedPathToReport) {
  const Shape sizes{4, 5}, two{5, 1}, one{1};
  EXPECT_FALSE((plan_dense<2>(sizes, {&two, &one}, {aligned_at(0), aligned_at(4)}, 4).dense));
}

// ---- the row kernel (plan_rows) ---------------------------------------------------------------

TEST(ElementwisePlan, BiasBroadcastAlongTheRowsTakesTheRowKernel) {
  // [16384, 768] + [768].
  const Shape sizes{16384, 768}, dense{768, 1}, bias{0, 1};
  const auto plan = plan_rows<3>(sizes, {&dense, &dense, &bias}, {aligned_at(0), aligned_at(4), aligned_at(8)}, 2);
  ASSERT_TRUE(plan.applies);
  EXPECT_EQ(plan.rows, 16384);
  EXPECT_EQ(plan.cols, 768);
  EXPECT_EQ(plan.vector_width, 8);
  EXPECT_EQ(plan.row_stride[0], 768);
  EXPECT_EQ(plan.row_stride[2], 0);
  EXPECT_FALSE(plan.per_row[1]);
  EXPECT_FALSE(plan.per_row[2]);
  // [B, T, C] + [C] as the linear layers add their bias: B and T merge into one row dimension.
  const Shape btc{16, 1024, 768}, btc_dense{1024 * 768, 768, 1}, btc_bias{0, 0, 1};
  const auto merged = plan_rows<3>(btc, {&btc_dense, &btc_dense, &btc_bias}, {aligned_at(0), aligned_at(4), aligned_at(8)}, 2);
  ASSERT_TRUE(merged.applies);
  EXPECT_EQ(merged.rows, 16 * 1024);
  EXPECT_EQ(merged.cols, 768);
  EXPECT_EQ(merged.row_stride[0], 768);
  EXPECT_EQ(merged.row_stride[2], 0);
  // Batches further apart than their rows do not merge: three dimensions stay strided.
  const Shape padded{1025 * 768, 768, 1};
  EXPECT_FALSE(
      (plan_rows<3>(btc, {&padded, &padded, &btc_bias}, {aligned_at(0), aligned_at(4), aligned_at(8)}, 2).applies));
  // The bias on the left, and size-1 dimensions around it, change nothing.
  const Shape sizes3{1, 16384, 768}, dense3{999, 768, 1}, bias3{0, 0, 1};
  EXPECT_TRUE(
      (plan_rows<3>(sizes3, {&dense3, &bias3, &dense3}, {aligned_at(0), aligned_at(4), aligned_at(8)}, 2).applies));
}

TEST(ElementwisePlan, OneValuePerRowIsReadSinglyAndNeedsNoAlignment) {
  const Shape sizes{33, 64}, dense{64, 1}, per_row{1, 0};
  const auto plan = plan_rows<3>(sizes, {&dense, &dense, &per_row}, {aligned_at(0), aligned_at(4), aligned_at(1)}, 4);
  ASSERT_TRUE(plan.applies);
  EXPECT_TRUE(plan.per_row[2]);
  EXPECT_EQ(plan.row_stride[2], 1);
  EXPECT_EQ(plan.vector_width, 4);
}

TEST(ElementwisePlan, NarrowedRowsTakeTheRowKernelWhenEveryRowStartsAligned) {
  // A [16384, 768] slice of a [16384, 2304] gradient plus a dense [16384, 768] one.
  const Shape sizes{16384, 768}, slice{2304, 1}, dense{768, 1};
  EXPECT_TRUE(
      (plan_rows<3>(sizes, {&slice, &slice, &dense}, {aligned_at(0), aligned_at(0), aligned_at(8)}, 2).applies));
  // Rows 770 floats apart start 8 bytes off the boundary every other row.
  const Shape odd_rows{770, 1};
  EXPECT_FALSE(
      (plan_rows<3>(sizes, {&odd_rows, &odd_rows, &dense}, {aligned_at(0), aligned_at(0), aligned_at(8)}, 4).applies));
}

TEST(ElementwisePlan, RowKernelRefusals) {
  const Shape sizes{33, 66}, dense{66, 1}, bias{0, 1};
  const std::array<const void*, 3> at{aligned_at(0), aligned_at(4), aligned_at(8)};
  // 66 floats are not whole vectors of four, even in rows of 68 that all start aligned; 66
  // doubles are whole vectors of two.
  const Shape rows_of_68{68, 1};
  EXPECT_FALSE((plan_rows<3>(sizes, {&rows_of_68, &rows_of_68, &bias}, at, 4).applies));
  EXPECT_TRUE((plan_rows<3>(sizes, {&dense, &dense, &bias}, at, 8).applies));
  // A misaligned dense operand.
  EXPECT_FALSE((plan_rows<3>(sizes, {&dense, &dense, &bias}, {aligned_at(0), aligned_at(1), aligned_at(8)}, 8).applies));
  // The output broadcast along a dimension, or strided along the columns.
  const Shape out_bias{0, 1}, column_strided{132, 2};
  EXPECT_FALSE((plan_rows<3>(sizes, {&out_bias, &dense, &bias}, at, 8).applies));
  EXPECT_FALSE((plan_rows<3>(sizes, {&column_strided, &dense, &bias}, at, 8).applies));
  // An input strided along the columns (a transposed view).
  const Shape transposed{1, 33};
  EXPECT_FALSE((plan_rows<3>(sizes, {&dense, &transposed, &bias}, at, 8).applies));
  // Three dimensions that did not coalesce (a per-channel bias over NCHW).
  const Shape nchw{2, 3, 64}, nchw_dense{192, 64, 1}, per_channel{0, 1, 0};
  EXPECT_FALSE((plan_rows<3>(nchw, {&nchw_dense, &nchw_dense, &per_channel}, at, 4).applies));
  // More vectors than one fast division covers.
  const Shape huge{std::int64_t{1} << 30, 8}, huge_dense{8, 1};
  EXPECT_FALSE((plan_rows<2>(huge, {&huge_dense, &huge_dense}, {aligned_at(0), aligned_at(4)}, 4).applies));
}

}  // namespace
}  // namespace sublet::ops::cuda
