// The 16-bit helpers of the batch-norm passes on the GPU: pack_from_floats (two floats per
// conversion instruction, ops/cuda/vector_pack.cuh) writes exactly the bits of core/half.h's
// host conversion (as store_compute does) for a sweep of about two million float32 patterns
// (ties, subnormals, overflow, NaNs with payloads and sign), and is_positive (a sign test on the
// storage bits, ops/cuda/half_types.cuh) agrees with `value > 0` for all 65,536 patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "half_test_support.h"
#include "tests/gpu_skip.h"
#include "vector_pack_probe.h"

using namespace sublet;
using namespace sublet::ops::testing;

namespace {

template <typename H>
void packs_match_the_host_conversion() {
  std::vector<float> values = float32_sweep();
  for (std::uint32_t payload : {1u, 0x1234u, 0x400000u, 0x7fffffu}) {  // NaNs, both signs
    for (std::uint32_t sign : {0u, 0x80000000u}) values.push_back(std::bit_cast<float>(sign | 0x7f800000u | payload));
  }
  std::vector<H> expected = to_half<H>(values);
  const std::vector<std::uint16_t> got = pack_from_floats_bits(DTypeOf<H>::value, values);
  ASSERT_EQ(got.size(), expected.size());
  std::int64_t wrong = 0, first = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i].bits) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << got.size() << " values; the first: float bits 0x" << std::hex
                      << (first >= 0 ? std::bit_cast<std::uint32_t>(values[static_cast<std::size_t>(first)]) : 0u)
                      << " gave 0x" << (first >= 0 ? got[static_cast<std::size_t>(first)] : 0) << ", expected 0x"
                      << (first >= 0 ? expected[static_cast<std::size_t>(first)].bits : 0);
}

template <typename H>
void positive_matches_the_comparison() {
  const std::vector<std::uint8_t> flags = is_positive_flags(DTypeOf<H>::value);
  ASSERT_EQ(flags.size(), 65536u);
  std::int64_t wrong = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    H h;
    h.bits = static_cast<std::uint16_t>(b);
    const bool expected = static_cast<float>(h) > 0.0f;  // false for NaN and both zeros
    if ((flags[b] != 0) != expected) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "of the 65,536 patterns";
}

}  // namespace

TEST(CudaVectorPack, BFloat16PairsGiveTheHostBits) {
  SUBLET_SKIP_WITHOUT_GPU("pack_from_floats<bfloat16> on the GPU");
  packs_match_the_host_conversion<BFloat16>();
}

TEST(CudaVectorPack, Float16PairsGiveTheHostBits) {
  SUBLET_SKIP_WITHOUT_GPU("pack_from_floats<float16> on the GPU");
  packs_match_the_host_conversion<Float16>();
}

TEST(CudaVectorPack, BFloat16IsPositiveOnTheBits) {
  SUBLET_SKIP_WITHOUT_GPU("is_positive<bfloat16> on the GPU");
  positive_matches_the_comparison<BFloat16>();
}

TEST(CudaVectorPack, Float16IsPositiveOnTheBits) {
  SUBLET_SKIP_WITHOUT_GPU("is_positive<float16> on the GPU");
  positive_matches_the_comparison<Float16>();
}
