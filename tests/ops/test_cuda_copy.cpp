// Copies on the GPU: host <-> device round trips (exact), strided cast-copies and fills against
// the CPU kernels (exact: the same static_casts), and device-to-device copy_bytes.
#include <gtest/gtest.h>

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
