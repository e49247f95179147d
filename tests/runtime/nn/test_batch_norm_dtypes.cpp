// The batch norm front's dtype rule: a bfloat16/float16 input takes float32
// weight, bias and running statistics; any other per-channel dtype with a 16-bit input is a
// DTypeError naming the tensor, what was expected and what was found; float32/float64 inputs
// keep their rule (per-channel tensors of the input's dtype). An accepted call runs: on the CPU
// through the 16-bit adapters (ops/cpu/half_adapters_cpu.h), so the output is 16-bit and the
// statistics float32 (tests/ops/test_cuda_half_batch_norm.cpp runs the GPU kernels).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/errors.h"
#include "runtime/factories.h"
#include "runtime/nn/functional.h"
#include "runtime/tensor.h"
#include "tests/throw_message.h"

namespace sublet {
namespace {

namespace F = nn::functional;
using sublet::testing::message_of;

constexpr std::int64_t kChannels = 3;

Tensor input_of(DType dtype) { return ones({2, kChannels, 4, 5}).to(dtype); }
Tensor per_channel(DType dtype) { return ones({kChannels}).to(dtype); }

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "\"" << part << "\" not in: " << message;
}

TEST(BatchNormDTypes, SixteenBitInputWithFloat64ParametersIsADTypeErrorNamingFloat32) {
  for (const DType input : {DType::BFloat16, DType::Float16}) {
    const std::string message = message_of<DTypeError>([&] {
      F::batch_norm(input_of(input), Tensor(), Tensor(), per_channel(DType::Float64), per_channel(DType::Float32),
                    /*training=*/true);
    });
    expect_contains(message, "batch_norm: weight must be float32");
    expect_contains(message, std::string("for a ") + dtype_name(input) + " input");
    expect_contains(message, "got float64");
  }
}

TEST(BatchNormDTypes, SixteenBitInputWithSixteenBitParametersOrStatisticsIsRefused) {
  const Tensor x = input_of(DType::BFloat16);
  const Tensor w = per_channel(DType::Float32);
  std::string message = message_of<DTypeError>(
      [&] { F::batch_norm(x, Tensor(), Tensor(), w, per_channel(DType::BFloat16), /*training=*/true); });
  expect_contains(message, "batch_norm: bias must be float32 for a bfloat16 input");
  expect_contains(message, "got bfloat16");
  message = message_of<DTypeError>([&] {
    F::batch_norm(x, per_channel(DType::Float16), per_channel(DType::Float32), w, w, /*training=*/true);
  });
  expect_contains(message, "batch_norm: running_mean must be float32 for a bfloat16 input");
  expect_contains(message, "got float16");
  message = message_of<DTypeError>([&] {
    F::batch_norm_relu(input_of(DType::Float16), Tensor(), per_channel(DType::Float32), per_channel(DType::Float64),
                       w, w, /*training=*/true);
  });
  expect_contains(message, "batch_norm: running_var must be float32 for a float16 input");
}

TEST(BatchNormDTypes, SixteenBitInputWithFloat32ParametersRuns) {
  for (const DType input : {DType::BFloat16, DType::Float16}) {
    const Tensor w = per_channel(DType::Float32);
    for (const bool training : {true, false}) {
      const Tensor rm = zeros({kChannels}), rv = ones({kChannels});
      const Tensor out = F::batch_norm(input_of(input), rm, rv, w, w, training);
      EXPECT_EQ(out.dtype(), input) << dtype_name(input);
      EXPECT_EQ(rm.dtype(), DType::Float32);
      // A constant input: training normalises it to 0 (+ bias 1); eval maps it to 1/sqrt(1+eps) + 1.
      const double expected = training ? 1.0 : 1.0 / std::sqrt(1.0 + 1e-5) + 1.0;
      const Tensor values = out.to(DType::Float64).contiguous();
      for (std::int64_t i = 0; i < values.numel(); ++i)
        ASSERT_NEAR(values.data<double>()[i], expected, 1e-2) << dtype_name(input) << " training " << training;
      if (training) EXPECT_NEAR(rm.to(DType::Float64).data<double>()[0], 0.1, 1e-6);  // momentum 0.1 toward mean 1
    }
    const Tensor fused = F::batch_norm_relu(input_of(input), input_of(input), zeros({kChannels}), ones({kChannels}),
                                            w, w, /*training=*/true);
    EXPECT_EQ(fused.dtype(), input);
  }
}

TEST(BatchNormDTypes, SixteenBitInputWithAWrongSizedParameterIsAShapeError) {
  const std::string message = message_of<ShapeError>([&] {
    F::batch_norm(input_of(DType::BFloat16), Tensor(), Tensor(), ones({kChannels + 1}), Tensor(), /*training=*/true);
  });
  expect_contains(message, "batch_norm: weight must be [3] (one per channel)");
}

TEST(BatchNormDTypes, Float32AndFloat64InputsKeepParametersOfTheirOwnDType) {
  std::string message = message_of<DTypeError>([&] {
    F::batch_norm(input_of(DType::Float32), Tensor(), Tensor(), per_channel(DType::Float64), Tensor(), true);
  });
  expect_contains(message, "batch_norm");
  expect_contains(message, "float64");
  message = message_of<DTypeError>([&] {
    F::batch_norm(input_of(DType::Float64), Tensor(), Tensor(), per_channel(DType::Float32), Tensor(), true);
  });
  expect_contains(message, "float32");
  // A float32 input with float32 parameters still runs on the CPU: output float32.
  const Tensor out = F::batch_norm(input_of(DType::Float32), zeros({kChannels}), ones({kChannels}),
                                   per_channel(DType::Float32), per_channel(DType::Float32), true);
  EXPECT_EQ(out.dtype(), DType::Float32);
}

}  // namespace
}  // namespace sublet
