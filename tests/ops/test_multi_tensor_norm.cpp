// The global norm and clip scale of a tensor list on the CPU (ops/multi_tensor_norm.h) against a
// long-double loop: every norm type, mixed dtypes, sizes that are not multiples of a vector,
// empty lists and tensors, a tensor of more than 2^24 elements; the scale leaves the tensors
// alone below max_norm and follows PyTorch's formula above it; non-finite norms; bad arguments.
#include "ops/multi_tensor_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/errors.h"
#include "tests/ops/multi_tensor_norm_support.h"
#include "tests/ops/nn_test_support.h"

namespace sublet::ops::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<double> kNormTypes = {2.0, 1.0, 3.0, kInf};

std::vector<HostArray> mixed_list(std::uint64_t seed) {
  std::vector<HostArray> arrays;
  const std::vector<std::int64_t> sizes = {1, 3, 7, 8191, 0, 8193, 20001, 5};
  const std::vector<DType> dtypes = {DType::Float32, DType::BFloat16, DType::Float16};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    arrays.push_back(random_array(dtypes[i % dtypes.size()], sizes[i], seed + i, 0.5 + static_cast<double>(i)));
  }
  return arrays;
}

float norm32(std::vector<HostArray>& arrays, double norm_type) {
  float norm = -1.0f;
  multi_tensor_norm(cpu_context(), DType::Float32, norm_tensors(arrays), norm_type, &norm);
  return norm;
}

TEST(MultiTensorNorm, EveryNormTypeOfAMixedListMatchesTheReference) {
  for (double norm_type : kNormTypes) {
    SCOPED_TRACE("norm_type " + std::to_string(norm_type));
    std::vector<HostArray> arrays = mixed_list(100);
    const double expected = reference_norm(arrays, norm_type);
    // float64 sums rounded once to float32: within an ulp of float32 of the long-double value.
    EXPECT_NEAR(norm32(arrays, norm_type), expected, 1.2e-7 * expected);
  }
}

TEST(MultiTensorNorm, Float64TensorsWithAFloat64Norm) {
  std::vector<HostArray> arrays = {random_array(DType::Float64, 1001, 1), random_array(DType::Float64, 17, 2, 4.0),
                                   random_array(DType::Float32, 33, 3)};
  for (double norm_type : kNormTypes) {
    SCOPED_TRACE("norm_type " + std::to_string(norm_type));
    double norm = -1.0;
    multi_tensor_norm(cpu_context(), DType::Float64, norm_tensors(arrays), norm_type, &norm);
    const double expected = reference_norm(arrays, norm_type);
    EXPECT_NEAR(norm, expected, 1e-13 * expected);
  }
}

TEST(MultiTensorNorm, EmptyListsAndEmptyTensorsHaveNormZeroAndOneTensorIsItsOwnNorm) {
  std::vector<HostArray> none;
  EXPECT_EQ(norm32(none, 2.0), 0.0f);
  std::vector<HostArray> empties = {random_array(DType::Float32, 0, 1), random_array(DType::BFloat16, 0, 2)};
  EXPECT_EQ(norm32(empties, 2.0), 0.0f);
  EXPECT_EQ(norm32(empties, kInf), 0.0f);
  std::vector<HostArray> one = {random_array(DType::Float32, 9, 3)};
  EXPECT_NEAR(norm32(one, 2.0), reference_norm(one, 2.0), 1.2e-7 * reference_norm(one, 2.0));
}

// A float32 running sum of 2^24 squares near 0.3 stops growing long before the end (its ulp
// reaches the terms), so only a wide accumulator gets this norm right.
TEST(MultiTensorNorm, MoreThanTwoToThe24ElementsAccumulateWithoutLoss) {
  std::vector<HostArray> arrays = {random_array(DType::Float32, (std::int64_t{1} << 24) + 5, 7),
                                   random_array(DType::BFloat16, 8195, 8)};
  const double expected = reference_norm(arrays, 2.0);
  EXPECT_NEAR(norm32(arrays, 2.0), expected, 1.2e-7 * expected);
}

TEST(MultiTensorClipScale, BelowMaxNormLeavesEveryTensorAsItWas) {
  std::vector<HostArray> arrays = mixed_list(200);
  const std::vector<HostArray> before = arrays;
  float norm = norm32(arrays, 2.0);
  multi_tensor_clip_scale(cpu_context(), DType::Float32, norm_tensors(arrays), &norm, 2.0 * norm);
  for (std::size_t t = 0; t < arrays.size(); ++t) EXPECT_EQ(arrays[t].bytes, before[t].bytes) << "tensor " << t;
}

TEST(MultiTensorClipScale, AboveMaxNormScalesAsPyTorchByTheCoefficientInEachDtype) {
  for (double norm_type : kNormTypes) {
    SCOPED_TRACE("norm_type " + std::to_string(norm_type));
    std::vector<HostArray> arrays = mixed_list(300);
    const std::vector<HostArray> before = arrays;
    float norm = norm32(arrays, norm_type);
    const double max_norm = 0.3 * norm;
    multi_tensor_clip_scale(cpu_context(), DType::Float32, norm_tensors(arrays), &norm, max_norm);
    const float coefficient = reference_coefficient<float>(norm, max_norm);
    EXPECT_NEAR(coefficient, 0.3, 1e-6);
    for (std::size_t t = 0; t < arrays.size(); ++t) {
      for (std::int64_t i = 0; i < arrays[t].numel; ++i) {
        const double expected = reference_scaled(arrays[t].dtype, before[t].at(i), coefficient);
        ASSERT_EQ(arrays[t].at(i), expected) << "tensor " << t << " (" << dtype_name(arrays[t].dtype) << ") element " << i;
      }
    }
  }
}

TEST(MultiTensorClipScale, Float64TensorsScaleByTheFloat64Coefficient) {
  std::vector<HostArray> arrays = {random_array(DType::Float64, 77, 11), random_array(DType::Float32, 13, 12)};
  const std::vector<HostArray> before = arrays;
  double norm = 0;
  multi_tensor_norm(cpu_context(), DType::Float64, norm_tensors(arrays), 2.0, &norm);
  multi_tensor_clip_scale(cpu_context(), DType::Float64, norm_tensors(arrays), &norm, norm / 7);
  const double coefficient = reference_coefficient<double>(norm, norm / 7);
  for (std::size_t t = 0; t < arrays.size(); ++t) {
    for (std::int64_t i = 0; i < arrays[t].numel; ++i) {
      ASSERT_EQ(arrays[t].at(i), reference_scaled(arrays[t].dtype, before[t].at(i), coefficient)) << t << " " << i;
    }
  }
}

TEST(MultiTensorClipScale, NonFiniteNormsPoisonTheTensors) {
  for (double norm_type : {2.0, kInf}) {
    std::vector<HostArray> arrays = mixed_list(400);
    arrays[3].set(5, std::numeric_limits<double>::quiet_NaN());
    float norm = norm32(arrays, norm_type);
    EXPECT_TRUE(std::isnan(norm)) << "norm_type " << norm_type;
    multi_tensor_clip_scale(cpu_context(), DType::Float32, norm_tensors(arrays), &norm, 1.0);
    EXPECT_TRUE(std::isnan(arrays[0].at(0)));
    EXPECT_TRUE(std::isnan(arrays[6].at(100)));
  }
  // An infinite element: an infinite norm, a coefficient of 0; finite elements become zeros.
  std::vector<HostArray> arrays = mixed_list(500);
  arrays[2].set(1, kInf);
  float norm = norm32(arrays, 2.0);
  EXPECT_EQ(norm, std::numeric_limits<float>::infinity());
  multi_tensor_clip_scale(cpu_context(), DType::Float32, norm_tensors(arrays), &norm, 1.0);
  EXPECT_EQ(arrays[0].at(0), 0.0);
  EXPECT_TRUE(std::isnan(arrays[2].at(1)));
}

TEST(MultiTensorNorm, BadArgumentsNameWhatWasExpected) {
  std::vector<HostArray> arrays = mixed_list(600);
  std::vector<NormTensor> tensors = norm_tensors(arrays);
  float norm = 0;
  const Context ctx = cpu_context();
  EXPECT_THROW(multi_tensor_norm(ctx, DType::Float32, tensors, 0.5, &norm), ValueError);
  EXPECT_THROW(multi_tensor_norm(ctx, DType::Float32, tensors, 2.0, nullptr), ValueError);
  EXPECT_THROW(multi_tensor_norm(ctx, DType::Int64, tensors, 2.0, &norm), DTypeError);
  EXPECT_THROW(multi_tensor_clip_scale(ctx, DType::Float32, tensors, &norm, -1.0), ValueError);
  EXPECT_THROW(multi_tensor_clip_scale(ctx, DType::Float32, tensors, nullptr, 1.0), ValueError);
  std::int64_t ints[3] = {1, 2, 3};
  const std::vector<NormTensor> int_list = {{ints, 3, DType::Int64}};
  EXPECT_THROW(multi_tensor_norm(ctx, DType::Float32, int_list, 2.0, &norm), DTypeError);
  double doubles[2] = {1.0, 2.0};
  const std::vector<NormTensor> float64_list = {{doubles, 2, DType::Float64}};
  try {
    multi_tensor_norm(ctx, DType::Float32, float64_list, 2.0, &norm);
    ADD_FAILURE() << "a float64 tensor with a float32 norm should throw";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a float64 norm, got float32"), std::string::npos) << e.what();
  }
  tensors[1].numel = -1;
  EXPECT_THROW(multi_tensor_norm(ctx, DType::Float32, tensors, 2.0, &norm), ValueError);
  tensors[1].numel = 3;
  tensors[1].data = nullptr;
  EXPECT_THROW(multi_tensor_clip_scale(ctx, DType::Float32, tensors, &norm, 1.0), ValueError);
}

}  // namespace
}  // namespace sublet::ops::testing
