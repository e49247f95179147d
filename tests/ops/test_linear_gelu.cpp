// The GELU in GEMM epilogues (ops/linear_gelu.h) without a GPU: which widths the aux layout
// takes, that the CPU has no kernel (the callers' unfused way) and says so as a DTypeError, the
// size errors, and that errors are not counted as fallbacks. The kernels themselves:
// tests/runtime/nn/test_linear_gelu_cuda.cpp.
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "ops/linear_gelu.h"

using namespace sublet;
using namespace sublet::ops;

namespace {

TEST(LinearGelu, EpilogueFitsHiddenWidthsThatAreMultiplesOf8) {
  for (std::int64_t n : {8, 16, 40, 3072}) EXPECT_TRUE(gelu_epilogue_fits(n)) << n;
  for (std::int64_t n : {0, 1, 4, 12, 36, 3071, -8}) EXPECT_FALSE(gelu_epilogue_fits(n)) << n;
}

TEST(LinearGelu, CpuHasNoKernelAndSaysSo) {
  for (DType dtype : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16}) {
    EXPECT_FALSE(has_linear_gelu(Device::cpu(), dtype)) << dtype_name(dtype);
  }
  const Context cpu = Context::for_device(Device::cpu());
  const std::int64_t before = linear_gelu_fallbacks();
  try {
    linear_gelu_forward(cpu, DType::BFloat16, {2, 8, 16}, nullptr, nullptr, nullptr, nullptr, nullptr);
    FAIL() << "expected a DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("linear_gelu_forward"), std::string::npos) << e.what();
  }
  EXPECT_THROW(linear_gelu_backward(cpu, DType::Float32, {2, 8, 16}, nullptr, nullptr, nullptr, nullptr, nullptr),
               DTypeError);
  EXPECT_EQ(linear_gelu_fallbacks(), before);
}

TEST(LinearGelu, NegativeSizesAreShapeErrors) {
  const Context cpu = Context::for_device(Device::cpu());
  try {
    linear_gelu_forward(cpu, DType::BFloat16, {2, -1, 16}, nullptr, nullptr, nullptr, nullptr, nullptr);
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("must not be negative"), std::string::npos) << message;
    EXPECT_NE(message.find("k -1"), std::string::npos) << message;
  }
  EXPECT_THROW(linear_gelu_backward(cpu, DType::BFloat16, {-3, 8, 16}, nullptr, nullptr, nullptr, nullptr, nullptr),
               ShapeError);
}

}  // namespace
