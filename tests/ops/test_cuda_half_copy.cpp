// Casts and fills of bfloat16 and float16 on the GPU (ops/cuda/copy.cu, ops/cuda/half_types.cuh):
// the device conversions give core/half.h's host bits exactly. Every one of the 65,536 16-bit
// patterns (NaNs, infinities and subnormals included) to float32, float64 and the other 16-bit
// type; a sweep of about two million float32 patterns (every upper 16 bits with the rounding
// bits, the ties and random lower bits) and of float64 values to 16 bits; strided, transposed
// and broadcast casts between every pair of float32, float64, int64, bfloat16, float16 against
// the CPU copy kernel; fills; host <-> device copies of 16-bit data.
#include <gtest/gtest.h>

#include <bit>
#include <random>

#include "core/half.h"
#include "cuda_test_support.h"
#include "half_test_support.h"
#include "ops/copy.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

// A contiguous cast of `values` from S to D on the GPU.
template <typename D, typename S>
std::vector<D> gpu_cast(const std::vector<S>& values) {
  const auto n = static_cast<std::int64_t>(values.size());
  DeviceBuffer<S> src(values);
  DeviceBuffer<D> dst(values.size());
  copy(gpu_context(), {n}, DTypeOf<D>::value, {dst.get(), {1}}, DTypeOf<S>::value, {src.get(), {1}});
  return dst.download();
}

template <typename H>
std::vector<H> all_patterns() {
  std::vector<H> out(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) out[b].bits = static_cast<std::uint16_t>(b);
  return out;
}

template <typename H>
void check_patterns_to_wide() {
  const std::vector<H> patterns = all_patterns<H>();
  std::vector<float> host_f32;
  std::vector<double> host_f64;
  for (H h : patterns) {
    host_f32.push_back(static_cast<float>(h));
    host_f64.push_back(static_cast<double>(h));
  }
  const std::string name = dtype_name(DTypeOf<H>::value);
  expect_float_bits_equal(gpu_cast<float>(patterns), host_f32, "float32 <- all " + name + " patterns");
  expect_float_bits_equal(gpu_cast<double>(patterns), host_f64, "float64 <- all " + name + " patterns");
}

template <typename H>
void check_sweep_to_half() {
  const std::vector<float> sweep = float32_sweep();
  const std::string name = dtype_name(DTypeOf<H>::value);
  expect_half_bits_equal(gpu_cast<H>(sweep), to_half<H>(sweep), name + " <- float32 sweep");
  // float64 goes through float32 (two roundings, as on the CPU): values between float32
  // neighbours, and the sweep's own values.
  std::vector<double> wide;
  std::mt19937_64 engine(15);
  for (std::size_t i = 0; i < sweep.size(); i += 7) {
    const double v = sweep[i];
    wide.push_back(v);
    wide.push_back(std::nextafter(v, std::numeric_limits<double>::infinity()));
    wide.push_back(v * (1.0 + static_cast<double>(engine() % 1000) * 1e-12));
  }
  std::vector<H> host;
  for (double v : wide) host.push_back(H(v));
  expect_half_bits_equal(gpu_cast<H>(wide), host, name + " <- float64 values");
}

// dst[4, 6] row-major <- src read transposed (stored [6, 4]) or as one broadcast row.
template <typename D, typename S>
void check_strided_cast(const std::vector<S>& src_values) {
  const std::string what = std::string(dtype_name(DTypeOf<D>::value)) + " <- " + dtype_name(DTypeOf<S>::value);
  ASSERT_EQ(src_values.size(), 24u);
  for (const Shape& src_strides : {Shape{1, 4}, Shape{0, 1}, Shape{4, 1}}) {
    std::vector<D> cpu_out(24);
    copy(Context::for_device(Device::cpu()), {4, 6}, DTypeOf<D>::value, {cpu_out.data(), {6, 1}}, DTypeOf<S>::value,
         {src_values.data(), src_strides});
    DeviceBuffer<S> src(src_values);
    DeviceBuffer<D> dst(24);
    copy(gpu_context(), {4, 6}, DTypeOf<D>::value, {dst.get(), {6, 1}}, DTypeOf<S>::value, {src.get(), src_strides});
    const std::vector<D> got = dst.download();
    if constexpr (std::is_same_v<D, BFloat16> || std::is_same_v<D, Float16>) {
      expect_half_bits_equal(got, cpu_out, what);
    } else if constexpr (std::is_floating_point_v<D>) {
      expect_float_bits_equal(got, cpu_out, what);
    } else {
      EXPECT_EQ(got, cpu_out) << what;
    }
  }
}

template <typename T>
std::vector<T> cast_source(const std::vector<float>& values) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>) {
    return to_half<T>(values);
  } else {
    std::vector<T> out;
    for (float v : values) out.push_back(static_cast<T>(v));
    return out;
  }
}

// Finite values every source type holds (integers for int64), with NaN and infinities for the
// floating-point sources (int64 destinations read only the finite ones: a NaN to int64 is
// undefined on the CPU too).
template <typename D, typename S>
void check_pair() {
  std::vector<float> values(24);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 1.75f - 20.5f;
  if constexpr (std::is_integral_v<S>) {
    for (float& v : values) v = std::round(v);
    values[3] = 1e7f;  // rounds in 16 bits
  } else if constexpr (!std::is_integral_v<D>) {
    values[1] = std::numeric_limits<float>::quiet_NaN();
    values[2] = -std::numeric_limits<float>::infinity();
    values[3] = 70000.0f;  // past float16's range: infinity
    values[4] = 3.0e-8f;   // a float16 subnormal
    values[5] = 1.0f + 0x1p-9f;  // a tie in bfloat16
  }
  check_strided_cast<D, S>(cast_source<S>(values));
}

template <typename D>
void check_all_sources() {
  check_pair<D, float>();
  check_pair<D, double>();
  check_pair<D, std::int64_t>();
  check_pair<D, BFloat16>();
  check_pair<D, Float16>();
}

}  // namespace

TEST(CudaHalfCopy, EverySixteenBitPatternWidensToTheHostsBits) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit -> float32/float64 casts against core/half.h");
  check_patterns_to_wide<BFloat16>();
  check_patterns_to_wide<Float16>();
}

TEST(CudaHalfCopy, EverySixteenBitPatternCastsToTheOtherSixteenBitTypeAsTheHost) {
  SUBLET_SKIP_WITHOUT_GPU("bfloat16 <-> float16 casts against core/half.h");
  const std::vector<BFloat16> bf16 = all_patterns<BFloat16>();
  const std::vector<Float16> f16 = all_patterns<Float16>();
  std::vector<Float16> host_f16;
  std::vector<BFloat16> host_bf16;
  for (BFloat16 b : bf16) host_f16.push_back(Float16(b));
  for (Float16 f : f16) host_bf16.push_back(static_cast<BFloat16>(f));
  expect_half_bits_equal(gpu_cast<Float16>(bf16), host_f16, "float16 <- all bfloat16 patterns");
  expect_half_bits_equal(gpu_cast<BFloat16>(f16), host_bf16, "bfloat16 <- all float16 patterns");
  // A copy to the same 16-bit type keeps every pattern, NaN payloads included.
  expect_half_bits_equal(gpu_cast<BFloat16>(bf16), bf16, "bfloat16 <- bfloat16");
  expect_half_bits_equal(gpu_cast<Float16>(f16), f16, "float16 <- float16");
}

TEST(CudaHalfCopy, Float32AndFloat64SweepsRoundToTheHostsBits) {
  SUBLET_SKIP_WITHOUT_GPU("float32/float64 -> 16-bit casts against core/half.h");
  check_sweep_to_half<BFloat16>();
  check_sweep_to_half<Float16>();
}

TEST(CudaHalfCopy, StridedCastsBetweenEveryPairMatchTheCpu) {
  SUBLET_SKIP_WITHOUT_GPU("strided 16-bit cast-copies against the CPU copy kernel");
  check_all_sources<BFloat16>();
  check_all_sources<Float16>();
  check_pair<float, BFloat16>();
  check_pair<float, Float16>();
  check_pair<double, BFloat16>();
  check_pair<double, Float16>();
  check_pair<std::int64_t, BFloat16>();
  check_pair<std::int64_t, Float16>();
}

TEST(CudaHalfCopy, FillsWriteTheCpuFillsBitsOnlyInTheView) {
  SUBLET_SKIP_WITHOUT_GPU("16-bit fills against the CPU fill kernel");
  for (double value : {-3.25, 1.0 / 3.0, 65519.0, 65520.0, 1e-8, 3.0e38, 1e300,
                       std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
    const auto check = [&](auto tag) {
      using H = decltype(tag);
      const DType dtype = DTypeOf<H>::value;
      std::vector<H> cpu_out = to_half<H>(random_values<float>(20, 53));
      // Every other column of a [4, 5] matrix.
      fill(Context::for_device(Device::cpu()), dtype, {4, 3}, {cpu_out.data(), {5, 2}}, value);
      DeviceBuffer<H> buffer(to_half<H>(random_values<float>(20, 53)));
      fill(gpu_context(), dtype, {4, 3}, {buffer.get(), {5, 2}}, value);
      expect_half_bits_equal(buffer.download(), cpu_out, std::string("fill ") + dtype_name(dtype) + " " +
                                                             std::to_string(value));
    };
    check(BFloat16{});
    check(Float16{});
  }
}

TEST(CudaHalfCopy, HostDeviceCopiesOfSixteenBitDataAreExact) {
  SUBLET_SKIP_WITHOUT_GPU("host/device copy_bytes of 16-bit data");
  const std::vector<BFloat16> values = all_patterns<BFloat16>();
  DeviceBuffer<BFloat16> first(values), second(values.size());
  copy_bytes(gpu(), second.get(), gpu(), first.get(), values.size() * sizeof(BFloat16));
  expect_half_bits_equal(second.download(), values, "host -> device -> device -> host");
}
