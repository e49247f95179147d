// Copies on the GPU: host <-> device round trips (exact), strided cast-copies and fills against
// the CPU kernels (exact: the same static_casts), and device-to-device copy_bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>

#include "core/half.h"

#include "cuda_test_support.h"
#include "ops/copy.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

TEST(CudaCopy, HostDeviceRoundTripIsExact) {
  SUBLET_SKIP_WITHOUT_GPU("host/device copy_bytes");
  const auto values = random_values<double>(1001, 51);
  DeviceBuffer<double> first(values), second(values.size());
  copy_bytes(gpu(), second.get(), gpu(), first.get(), values.size() * sizeof(double));
  expect_equal(second.download(), values, "host -> device -> device -> host");
}

template <typename D, typename S>
void check_cast_copy(const std::string& what) {
  // dst [4, 6] row-major <- src stored [6, 4] read transposed, and a broadcast row (stride 0).
  std::vector<S> src_values(24);
  for (std::size_t i = 0; i < src_values.size(); ++i) src_values[i] = static_cast<S>(static_cast<double>(i) * 1.75 - 20.5);
  for (const Shape& src_strides : {Shape{1, 4}, Shape{0, 1}}) {
    std::vector<D> cpu_out(24);
    copy(Context::for_device(Device::cpu()), {4, 6}, DTypeOf<D>::value, {cpu_out.data(), {6, 1}}, DTypeOf<S>::value,
         {src_values.data(), src_strides});
    DeviceBuffer<S> src(src_values);
    DeviceBuffer<D> dst(24);
    copy(gpu_context(), {4, 6}, DTypeOf<D>::value, {dst.get(), {6, 1}}, DTypeOf<S>::value, {src.get(), src_strides});
    expect_equal(dst.download(), cpu_out, what);
  }
}

TEST(CudaCopy, StridedCastCopiesMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("strided cast-copy kernel");
  check_cast_copy<float, float>("float <- float");
  check_cast_copy<float, double>("float <- double");
  check_cast_copy<double, float>("double <- float");
  check_cast_copy<std::int64_t, float>("int64 <- float");
  check_cast_copy<float, std::int64_t>("float <- int64");
  check_cast_copy<std::int64_t, double>("int64 <- double");
}

TEST(CudaCopy, FillWritesOnlyTheView) {
  SUBLET_SKIP_WITHOUT_GPU("strided fill kernel");
  const auto values = random_values<float>(20, 52);
  std::vector<float> cpu_out = values;
  // Every other column of a [4, 5] matrix.
  fill(Context::for_device(Device::cpu()), DType::Float32, {4, 3}, {cpu_out.data(), {5, 2}}, -3.25);
  DeviceBuffer<float> buffer(values);
  fill(gpu_context(), DType::Float32, {4, 3}, {buffer.get(), {5, 2}}, -3.25);
  expect_equal(buffer.download(), cpu_out, "fill of a strided view");
}

// ---- the dense and row kernels (ops/cuda/copy.cu) ----------------------------------------------
// Each case names the path its layout takes (ops/cuda/elementwise_plan.h); every path must give
// the CPU's bits, and elements outside the destination view keep their values.

namespace {

struct CopyLayout {
  const char* what;
  Shape sizes, dst_strides, src_strides;
  std::size_t dst_span, src_span;
  std::size_t dst_shift = 0, src_shift = 0;  // elements off the 16-byte aligned buffer start
};

template <typename D, typename S>
void check_copy_layout(const CopyLayout& c) {
  const std::string what = std::string(c.what) + " " + dtype_name(DTypeOf<D>::value) + " <- " +
                           dtype_name(DTypeOf<S>::value);
  std::vector<S> src_values(c.src_span + c.src_shift);
  for (std::size_t i = 0; i < src_values.size(); ++i) {
    src_values[i] = static_cast<S>(static_cast<double>(static_cast<std::int64_t>(i * 37 % 201) - 100) * 0.625);
  }
  std::vector<D> cpu_out(c.dst_span + c.dst_shift, static_cast<D>(-7.0));
  copy(Context::for_device(Device::cpu()), c.sizes, DTypeOf<D>::value, {cpu_out.data() + c.dst_shift, c.dst_strides},
       DTypeOf<S>::value, {src_values.data() + c.src_shift, c.src_strides});
  DeviceBuffer<S> src(src_values);
  DeviceBuffer<D> dst(std::vector<D>(c.dst_span + c.dst_shift, static_cast<D>(-7.0)));
  copy(gpu_context(), c.sizes, DTypeOf<D>::value, {dst.get() + c.dst_shift, c.dst_strides}, DTypeOf<S>::value,
       {src.get() + c.src_shift, c.src_strides});
  if constexpr (std::is_arithmetic_v<D>) {
    expect_equal(dst.download(), cpu_out, what);
  } else {
    const std::vector<D> got = dst.download();
    ASSERT_EQ(got.size(), cpu_out.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].bits, cpu_out[i].bits) << what << " [" << i << "]";
  }
}

std::vector<CopyLayout> copy_layouts() {
  std::vector<CopyLayout> out;
  for (const std::int64_t n : {1, 3, 1023, 4097, (1 << 16) + 5}) {
    const auto span = static_cast<std::size_t>(n);
    out.push_back({"dense", {n}, {1}, {1}, span, span});                    // the dense kernel, a tail
    out.push_back({"dense, src at +1", {n}, {1}, {1}, span, span, 0, 1});  // the strided kernel
    out.push_back({"dense, dst at +1", {n}, {1}, {1}, span, span, 1, 0});
    out.push_back({"one element broadcast", {n}, {1}, {0}, span, 1, 0, 1});  // dense, src read singly
  }
  // 37 rows of 64 columns inside rows of 80 (a slice of the last dimension): the row kernel.
  out.push_back({"rows of 64 in rows of 80", {37, 64}, {80, 1}, {64, 1}, 37 * 80, 37 * 64});
  out.push_back({"rows of 64 from rows of 80", {37, 64}, {64, 1}, {80, 1}, 37 * 64, 37 * 80});
  out.push_back({"one value per row", {37, 64}, {64, 1}, {1, 0}, 37 * 64, 37});
  // 61 columns: not whole vectors, the strided kernel.
  out.push_back({"rows of 61 in rows of 80", {37, 61}, {80, 1}, {61, 1}, 37 * 80, 37 * 61});
  return out;
}

template <typename D, typename S>
void check_copy_layouts() {
  for (const CopyLayout& c : copy_layouts()) check_copy_layout<D, S>(c);
}

}  // namespace

TEST(CudaCopy, DenseAndRowCastCopiesMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("dense and row cast-copy kernels");
  check_copy_layouts<float, float>();
  check_copy_layouts<float, double>();
  check_copy_layouts<double, float>();
  check_copy_layouts<std::int64_t, float>();
  check_copy_layouts<BFloat16, float>();
  check_copy_layouts<float, BFloat16>();
  check_copy_layouts<BFloat16, BFloat16>();
  check_copy_layouts<Float16, double>();
}

TEST(CudaCopy, DenseFillsMatchCpuAndStayInTheView) {
  SUBLET_SKIP_WITHOUT_GPU("dense fills: the vector kernel and the memset of zeros");
  for (const std::int64_t n : {1, 5, 1023, 4097}) {
    for (const double value : {0.0, -0.0, 2.5}) {
      for (const std::size_t shift : {std::size_t{0}, std::size_t{1}}) {
        const std::string what = "fill " + std::to_string(n) + " at +" + std::to_string(shift) + " with " +
                                 std::to_string(value);
        const auto n_size = static_cast<std::size_t>(n);
        const auto values = random_values<float>(n + 2, 53);  // one guard element after the view
        std::vector<float> cpu_out = values;
        fill(Context::for_device(Device::cpu()), DType::Float32, {n}, {cpu_out.data() + shift, {1}}, value);
        DeviceBuffer<float> buffer(values);
        fill(gpu_context(), DType::Float32, {n}, {buffer.get() + shift, {1}}, value);
        const std::vector<float> got = buffer.download();
        for (std::size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(std::signbit(got[i]), std::signbit(cpu_out[i])) << what << " [" << i << "]";
        }
        expect_equal(got, cpu_out, what);
        // The 16-bit fill writes the host rounding's bits, zeros by memset.
        std::vector<BFloat16> half_cpu(n_size + 2, BFloat16(1.5f));
        fill(Context::for_device(Device::cpu()), DType::BFloat16, {n}, {half_cpu.data() + shift, {1}}, value);
        DeviceBuffer<BFloat16> half(std::vector<BFloat16>(n_size + 2, BFloat16(1.5f)));
        fill(gpu_context(), DType::BFloat16, {n}, {half.get() + shift, {1}}, value);
        const std::vector<BFloat16> half_got = half.download();
        for (std::size_t i = 0; i < half_got.size(); ++i) ASSERT_EQ(half_got[i].bits, half_cpu[i].bits) << what;
      }
    }
  }
}
