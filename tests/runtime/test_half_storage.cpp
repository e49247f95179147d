// bfloat16 and float16 as storage types on the CPU (core/half.h, the CPU copy and fill kernels):
// conversions round to nearest, ties to even, with the edge cases of each format (float16's
// subnormals and overflow, NaN and infinities), checked against values worked out by hand and,
// on random data, against the two representable neighbours of each float32; tensors cast to
// and from them and fill with them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "core/half.h"
#include "runtime/factories.h"
#include "runtime/tensor.h"

namespace sublet {
namespace {

float via_bf16(float x) { return static_cast<float>(BFloat16(x)); }
float via_fp16(float x) { return static_cast<float>(Float16(x)); }

TEST(HalfStorage, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(via_bf16(1.0f), 1.0f);
  EXPECT_EQ(via_bf16(-3.5f), -3.5f);
  // 1 + 2^-8 lies half way between 1 and 1 + 2^-7: ties to the even mantissa, 1.
  EXPECT_EQ(via_bf16(1.0f + 0x1p-8f), 1.0f);
  // 1 + 3 * 2^-8 lies half way between 1 + 2^-7 and 1 + 2^-6: ties to 1 + 2^-6 (even).
  EXPECT_EQ(via_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
  // Just above the half-way point rounds up.
  EXPECT_EQ(via_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_TRUE(std::isinf(via_bf16(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(via_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload sits only in the dropped bits must not become infinity.
  EXPECT_TRUE(std::isnan(via_bf16(std::bit_cast<float>(0x7f800001u))));
  // The largest float rounds up past bfloat16's largest finite value: infinity, as PyTorch.
  EXPECT_TRUE(std::isinf(via_bf16(std::numeric_limits<float>::max())));
}

TEST(HalfStorage, Float16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(Float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(Float16(-2.0f).bits, 0xc000);
  EXPECT_EQ(via_fp16(65504.0f), 65504.0f);                  // the largest finite
  EXPECT_EQ(via_fp16(65519.0f), 65504.0f);                  // below the half way to 65536: stays
  EXPECT_TRUE(std::isinf(via_fp16(65520.0f)));              // half way to 65536: ties up, overflows
  EXPECT_TRUE(std::isinf(via_fp16(1e6f)));
  EXPECT_EQ(via_fp16(0x1p-14f), 0x1p-14f);                  // the smallest normal
  EXPECT_EQ(via_fp16(0x1p-24f), 0x1p-24f);                  // the smallest subnormal
  EXPECT_EQ(via_fp16(0x1p-25f), 0.0f);                      // half way to it: ties to even, zero
  EXPECT_EQ(via_fp16(0x1.8p-25f), 0x1p-24f);                // above half way: up
  EXPECT_EQ(via_fp16(3 * 0x1p-25f), 2 * 0x1p-24f);          // 1.5 ulp: ties to even, 2 ulp
  EXPECT_EQ(via_fp16(1.0f + 0x1p-11f), 1.0f);               // half an ulp above 1: ties to even
  EXPECT_EQ(via_fp16(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);
  // A subnormal that rounds up into the smallest normal.
  EXPECT_EQ(via_fp16(0x1p-14f - 0x1p-26f), 0x1p-14f);
  EXPECT_TRUE(std::signbit(via_fp16(-0.0f)));
  EXPECT_TRUE(std::isnan(via_fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isinf(via_fp16(-std::numeric_limits<float>::infinity())));
}

// Every float32 in range goes to one of its two representable neighbours, the nearer one
// (ties excluded by construction of random data: checked above by hand).
template <typename H>
void expect_nearest(float x, float lower, float upper) {
  const float y = static_cast<float>(H(x));
  ASSERT_TRUE(y == lower || y == upper) << x << " -> " << y << " not in {" << lower << ", " << upper << "}";
  if (std::abs(x - lower) < std::abs(upper - x)) {
    EXPECT_EQ(y, lower) << x;
  } else if (std::abs(x - lower) > std::abs(upper - x)) {
    EXPECT_EQ(y, upper) << x;
  }
}

TEST(HalfStorage, RandomValuesGoToTheNearerNeighbour) {
  std::mt19937 rng(16);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-14, 15);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? -1.0f : 1.0f);
    // bfloat16 keeps the top 16 bits: truncation and one ulp away from zero bracket x.
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(x) & 0xffff0000u;
    const float b0 = std::bit_cast<float>(bits), b1 = std::bit_cast<float>(bits + 0x10000u);
    expect_nearest<BFloat16>(x, std::min(b0, b1), std::max(b0, b1));
    // float16 in its normal range: 10 fraction bits.
    if (std::abs(x) < 65504.0f && std::abs(x) >= 0x1p-14f) {
      const int e = std::ilogb(x);
      const float ulp = std::ldexp(1.0f, e - 10);
      const float down = std::trunc(x / ulp) * ulp;
      const float other = down + (x < 0 ? -ulp : ulp);
      expect_nearest<Float16>(x, std::min(down, other), std::max(down, other));
    }
  }
}

TEST(HalfStorage, TensorsCastToAndFromTheSixteenBitTypesAndFill) {
  Generator g(3);
  const Tensor x = randn({4, 33}, g);
  const std::vector<float> original = x.to_vector<float>();
  for (DType half : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(half));
    const Tensor h = x.to(half);
    EXPECT_EQ(h.dtype(), half);
    EXPECT_EQ(h.nbytes(), x.numel() * 2u);
    const std::vector<float> back = h.to_vector<float>();
    const std::vector<double> as_double = h.to_vector<double>();
    const double tolerance = half == DType::BFloat16 ? 0x1p-8 : 0x1p-11;  // half an ulp, relative
    for (std::size_t i = 0; i < original.size(); ++i) {
      const float expected = half == DType::BFloat16 ? via_bf16(original[i]) : via_fp16(original[i]);
      EXPECT_EQ(back[i], expected) << i;
      EXPECT_EQ(as_double[i], static_cast<double>(expected)) << i;
      EXPECT_LE(std::abs(back[i] - original[i]), tolerance * std::abs(original[i])) << i;
    }
    // A transposed view casts element by element too (the tiled path).
    const Tensor t = x.transpose(0, 1).contiguous().to(half).to(DType::Float32);
    const std::vector<float> transposed = t.to_vector<float>();
    EXPECT_EQ(transposed[1], back[33]);
    // Between the two 16-bit types, and fills.
    const Tensor other = h.to(half == DType::BFloat16 ? DType::Float16 : DType::BFloat16);
    EXPECT_EQ(other.to_vector<float>()[0], half == DType::BFloat16 ? via_fp16(back[0]) : via_bf16(back[0]));
    const std::vector<float> filled = full({5}, 1.5, half).to_vector<float>();
    for (float v : filled) EXPECT_EQ(v, 1.5f);
  }
}

}  // namespace
}  // namespace sublet
