// The GPU kernels' 16-bit conversions (ops/cuda/half_types.cuh) compiled for the host, on the
// CPU: CUDA's intrinsics run their software emulation of the hardware's round-to-nearest-even
// there, so this checks everything around them against core/half.h without a GPU: the NaN rule
// (CUDA's conversions write a canonical NaN, the host keeps sign and payload), the widening
// shift and the float16 NaN payload, the float64 NaN rule, and which path each pair of types
// takes. tests/ops/test_cuda_half_copy.cpp checks the same on the GPU's instructions.
#include "ops/cuda/half_types.cuh"

#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <random>

#include "core/half.h"
#include "half_test_support.h"

namespace sublet::ops::cuda {
namespace {

using testing::float32_sweep;

std::uint16_t bits_of(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
std::uint16_t bits_of(__half h) { return __half_as_ushort(h); }

template <typename Host, typename Device>
Device device_of(Host h) {
  if constexpr (std::is_same_v<Device, __nv_bfloat16>) {
    return __ushort_as_bfloat16(h.bits);
  } else {
    return __ushort_as_half(h.bits);
  }
}

template <typename Host>
Host host_of(std::uint16_t bits) {
  Host h;
  h.bits = bits;
  return h;
}

// Counts mismatches and names the first few.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  ~Mismatches() { EXPECT_EQ(count_, 0u) << what_ << ": " << count_ << " mismatches"; }
  template <typename A, typename B>
  void check(bool equal, std::uint64_t input, A got, B expected) {
    if (equal) return;
    if (count_++ < 5) {
      ADD_FAILURE() << what_ << ": input bits 0x" << std::hex << input << " gave 0x" << got << ", expected 0x"
                    << expected << std::dec;
    }
  }

 private:
  std::string what_;
  std::size_t count_ = 0;
};

template <typename Host, typename Device>
void check_all_patterns(const char* name) {
  Mismatches to_f32(std::string(name) + " -> float32"), to_f64(std::string(name) + " -> float64");
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const Host h = host_of<Host>(static_cast<std::uint16_t>(b));
    const Device d = device_of<Host, Device>(h);
    const auto got32 = std::bit_cast<std::uint32_t>(half_to_float(d));
    const auto want32 = std::bit_cast<std::uint32_t>(static_cast<float>(h));
    to_f32.check(got32 == want32, b, got32, want32);
    const auto got64 = std::bit_cast<std::uint64_t>(convert_element<double>(d));
    const auto want64 = std::bit_cast<std::uint64_t>(static_cast<double>(h));
    to_f64.check(got64 == want64, b, got64, want64);
  }
}

TEST(HalfTypesHost, EveryPatternWidensToTheHostsBits) {
  check_all_patterns<BFloat16, __nv_bfloat16>("bfloat16");
  check_all_patterns<Float16, __half>("float16");
}

TEST(HalfTypesHost, Float32SweepNarrowsToTheHostsBits) {
  Mismatches bf16("float32 -> bfloat16"), f16("float32 -> float16");
  for (const float f : float32_sweep()) {
    const std::uint32_t input = std::bit_cast<std::uint32_t>(f);
    const std::uint16_t got_b = bits_of(float_to_half<__nv_bfloat16>(f)), want_b = BFloat16(f).bits;
    bf16.check(got_b == want_b, input, got_b, want_b);
    const std::uint16_t got_h = bits_of(float_to_half<__half>(f)), want_h = Float16(f).bits;
    f16.check(got_h == want_h, input, got_h, want_h);
    // The copy kernel's element conversion takes the same path.
    bf16.check(bits_of(convert_element<__nv_bfloat16>(f)) == want_b, input, bits_of(convert_element<__nv_bfloat16>(f)),
               want_b);
  }
}

TEST(HalfTypesHost, Float64AndInt64ToSixteenBitsGoThroughFloat32AsTheHost) {
  Mismatches bf16("float64 -> bfloat16"), f16("float64 -> float16");
  std::mt19937_64 engine(9);
  const std::vector<float> sweep = float32_sweep();
  for (std::size_t i = 0; i < sweep.size(); i += 5) {
    for (const double v : {static_cast<double>(sweep[i]),
                           std::nextafter(static_cast<double>(sweep[i]), std::numeric_limits<double>::infinity()),
                           std::bit_cast<double>(engine())}) {
      const std::uint64_t input = std::bit_cast<std::uint64_t>(v);
      const std::uint16_t got_b = bits_of(convert_element<__nv_bfloat16>(v)), want_b = BFloat16(v).bits;
      bf16.check(got_b == want_b, input, got_b, want_b);
      const std::uint16_t got_h = bits_of(convert_element<__half>(v)), want_h = Float16(v).bits;
      f16.check(got_h == want_h, input, got_h, want_h);
    }
  }
  Mismatches ints("int64 -> 16 bits");
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{-7}, std::int64_t{65519}, std::int64_t{65520},
                         std::int64_t{16777217}, std::int64_t{-9007199254740993},
                         std::numeric_limits<std::int64_t>::max()}) {
    ints.check(bits_of(convert_element<__half>(v)) == Float16(v).bits, static_cast<std::uint64_t>(v),
               bits_of(convert_element<__half>(v)), Float16(v).bits);
    ints.check(bits_of(convert_element<__nv_bfloat16>(v)) == BFloat16(v).bits, static_cast<std::uint64_t>(v),
               bits_of(convert_element<__nv_bfloat16>(v)), BFloat16(v).bits);
  }
}

TEST(HalfTypesHost, SixteenBitTypesConvertToEachOtherAsTheHost) {
  Mismatches to_f16("bfloat16 -> float16"), to_bf16("float16 -> bfloat16"), same("16-bit -> same type");
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const BFloat16 hb = host_of<BFloat16>(bits);
    const Float16 hf = host_of<Float16>(bits);
    const std::uint16_t got_h = bits_of(convert_element<__half>(__ushort_as_bfloat16(bits))), want_h = Float16(hb).bits;
    to_f16.check(got_h == want_h, b, got_h, want_h);
    const std::uint16_t got_b = bits_of(convert_element<__nv_bfloat16>(__ushort_as_half(bits)));
    const std::uint16_t want_b = static_cast<BFloat16>(hf).bits;
    to_bf16.check(got_b == want_b, b, got_b, want_b);
    same.check(bits_of(convert_element<__half>(__ushort_as_half(bits))) == bits, b, bits, bits);
    same.check(bits_of(convert_element<__nv_bfloat16>(__ushort_as_bfloat16(bits))) == bits, b, bits, bits);
  }
}

TEST(HalfTypesHost, ComputeTypeIsFloatAndRoundTripsAreExact) {
  static_assert(std::is_same_v<ComputeType<__nv_bfloat16>, float>);
  static_assert(std::is_same_v<ComputeType<__half>, float>);
  static_assert(std::is_same_v<ComputeType<double>, double>);
  static_assert(std::is_same_v<ComputeType<std::int64_t>, std::int64_t>);
  Mismatches round_trip("store(load(x)) for non-NaN x");
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    if (!std::isnan(static_cast<float>(host_of<BFloat16>(bits)))) {
      const std::uint16_t got = bits_of(store_compute<__nv_bfloat16>(load_compute(__ushort_as_bfloat16(bits))));
      round_trip.check(got == bits, b, got, bits);
    }
    if (!std::isnan(static_cast<float>(host_of<Float16>(bits)))) {
      const std::uint16_t got = bits_of(store_compute<__half>(load_compute(__ushort_as_half(bits))));
      round_trip.check(got == bits, b, got, bits);
    }
  }
}

}  // namespace
}  // namespace sublet::ops::cuda
