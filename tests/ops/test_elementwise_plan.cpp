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

}  // namespace
}  // namespace sublet::ops::cuda
