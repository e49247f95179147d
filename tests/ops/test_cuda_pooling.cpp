// Pooling kernels on the GPU against the CPU kernels. Max pooling (values, int64 indices,
// gradients) is exact: the same comparisons and the same order of additions. Average and
// adaptive pooling sum in the element type in the CPU's order too; they are held to 1 float ulp
// (rtol 2e-7) rather than bit equality only to leave room for the device's division.
#include <gtest/gtest.h>

#include <limits>

#include "cuda_test_support.h"
#include "max_pool_test_support.h"
#include "ops/cuda/pooling_cuda.h"
#include "ops/pooling.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

Pool2dShape pool(std::int64_t k, std::int64_t stride, std::int64_t pad, std::int64_t dilation) {
  Pool2dShape s;
  s.batch = 2, s.channels = 3, s.in_height = 11, s.in_width = 9;
  s.kernel_h = k, s.kernel_w = k, s.stride_h = stride, s.stride_w = stride, s.pad_h = pad, s.pad_w = pad;
  s.dilation_h = dilation, s.dilation_w = dilation;
  return s;
}

// indexing: Auto takes the 32-bit kernels for these sizes; Wide forces the 64-bit ones that
// serve tensors of 2^31 elements and more.
template <typename T>
void check_max(const Pool2dShape& s, const std::string& what, cuda::PoolIndexing indexing = cuda::PoolIndexing::Auto) {
  auto input = random_values<T>(s.input_numel(), 101);
  for (std::size_t i = 0; i < input.size(); i += 7) input[i] = std::round(input[i]);  // ties
  if (input.size() > 13) input[13] = std::numeric_limits<T>::quiet_NaN();
  const auto grad_output = random_values<T>(s.output_numel(), 102);
  const Context cpu = Context::for_device(Device::cpu());
  const DType dtype = DTypeOf<T>::value;
  std::vector<T> out(s.output_numel()), grad_input(s.input_numel());
  std::vector<std::int64_t> indices(s.output_numel());
  max_pool2d_forward(cpu, s, dtype, input.data(), out.data(), indices.data());
  max_pool2d_backward(cpu, s, dtype, grad_output.data(), indices.data(), grad_input.data());

  DeviceBuffer<T> d_input(input), d_out(s.output_numel()), d_grad_output(grad_output), d_grad_input(s.input_numel());
  DeviceBuffer<std::int64_t> d_indices(s.output_numel());
  cuda::max_pool2d_forward(gpu_context(), s, dtype, d_input.get(), d_out.get(), d_indices.get(), indexing);
  cuda::max_pool2d_backward(gpu_context(), s, dtype, d_grad_output.get(), d_indices.get(), d_grad_input.get(),
                            indexing);
  expect_equal(d_out.download(), out, what + " max values");
  expect_equal(d_indices.download(), indices, what + " max indices");
  expect_equal(d_grad_input.download(), grad_input, what + " max grad_input");

  // The same kernels saving one-byte window positions instead of the indices.
  DeviceBuffer<std::uint8_t> d_positions(s.output_numel());
  DeviceBuffer<T> d_out2(s.output_numel()), d_grad_input2(s.input_numel());
  cuda::max_pool2d_forward_positions(gpu_context(), s, dtype, d_input.get(), d_out2.get(), d_positions.get(),
                                     indexing);
  cuda::max_pool2d_backward_positions(gpu_context(), s, dtype, d_grad_output.get(), d_positions.get(),
                                      d_grad_input2.get(), indexing);
  expect_equal(d_out2.download(), out, what + " max values (positions)");
  expect_equal(d_positions.download(), positions_of(s, indices), what + " max window positions");
  expect_equal(d_grad_input2.download(), grad_input, what + " max grad_input (positions)");
}

template <typename T>
void check_avg(const Pool2dShape& s, bool count_include_pad, const std::string& what) {
  const auto input = random_values<T>(s.input_numel(), 103);
  const auto grad_output = random_values<T>(s.output_numel(), 104);
  const Context cpu = Context::for_device(Device::cpu());
  const DType dtype = DTypeOf<T>::value;
  std::vector<T> out(s.output_numel()), grad_input(s.input_numel());
  avg_pool2d_forward(cpu, s, dtype, input.data(), out.data(), count_include_pad);
  avg_pool2d_backward(cpu, s, dtype, grad_output.data(), grad_input.data(), count_include_pad);
  DeviceBuffer<T> d_input(input), d_out(s.output_numel()), d_grad_output(grad_output), d_grad_input(s.input_numel());
  avg_pool2d_forward(gpu_context(), s, dtype, d_input.get(), d_out.get(), count_include_pad);
  avg_pool2d_backward(gpu_context(), s, dtype, d_grad_output.get(), d_grad_input.get(), count_include_pad);
  const double rtol = std::is_same_v<T, float> ? 2e-7 : 1e-15;
  expect_close(d_out.download(), out, rtol, 0.0, what + " avg output");
  expect_close(d_grad_input.download(), grad_input, rtol, 0.0, what + " avg grad_input");
}

template <typename T>
void check_adaptive(std::int64_t out_h, std::int64_t out_w, const std::string& what) {
  const AdaptivePool2dShape s{2, 3, 10, 7, out_h, out_w};
  const auto input = random_values<T>(s.input_numel(), 105);
  const auto grad_output = random_values<T>(s.output_numel(), 106);
  const Context cpu = Context::for_device(Device::cpu());
  const DType dtype = DTypeOf<T>::value;
  std::vector<T> out(s.output_numel()), grad_input(s.input_numel());
  adaptive_avg_pool2d_forward(cpu, s, dtype, input.data(), out.data());
  adaptive_avg_pool2d_backward(cpu, s, dtype, grad_output.data(), grad_input.data());
  DeviceBuffer<T> d_input(input), d_out(s.output_numel()), d_grad_output(grad_output), d_grad_input(s.input_numel());
  adaptive_avg_pool2d_forward(gpu_context(), s, dtype, d_input.get(), d_out.get());
  adaptive_avg_pool2d_backward(gpu_context(), s, dtype, d_grad_output.get(), d_grad_input.get());
  const double rtol = std::is_same_v<T, float> ? 2e-7 : 1e-15;
  expect_close(d_out.download(), out, rtol, 0.0, what + " adaptive output");
  expect_close(d_grad_input.download(), grad_input, rtol, 0.0, what + " adaptive grad_input");
}

}  // namespace

TEST(CudaPooling, MaxPoolMatchesCpuExactly) {
  SUBLET_SKIP_WITHOUT_GPU("max pooling values/indices/gradients");
  check_max<float>(pool(3, 2, 1, 1), "float 3x3 s2 p1");
  check_max<float>(pool(2, 2, 0, 1), "float 2x2 s2");
  check_max<float>(pool(3, 1, 1, 2), "float 3x3 s1 p1 dilation 2 (overlapping windows)");
  check_max<double>(pool(3, 2, 1, 1), "double 3x3 s2 p1");
}

TEST(CudaPooling, MaxPoolThroughTheOpsEntryPointMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("ops::max_pool2d_* dispatch to the GPU");
  const Pool2dShape s = pool(3, 2, 1, 1);
  const auto input = random_values<float>(s.input_numel(), 107), grad_output = random_values<float>(s.output_numel(), 108);
  const Context cpu = Context::for_device(Device::cpu());
  std::vector<float> out(s.output_numel()), grad_input(s.input_numel());
  std::vector<std::int64_t> indices(s.output_numel());
  max_pool2d_forward(cpu, s, DType::Float32, input.data(), out.data(), indices.data());
  max_pool2d_backward(cpu, s, DType::Float32, grad_output.data(), indices.data(), grad_input.data());
  DeviceBuffer<float> d_input(input), d_out(s.output_numel()), d_grad_output(grad_output), d_grad_input(s.input_numel());
  DeviceBuffer<std::int64_t> d_indices(s.output_numel());
  max_pool2d_forward(gpu_context(), s, DType::Float32, d_input.get(), d_out.get(), d_indices.get());
  max_pool2d_backward(gpu_context(), s, DType::Float32, d_grad_output.get(), d_indices.get(), d_grad_input.get());
  expect_equal(d_out.download(), out, "ops entry max values");
  expect_equal(d_indices.download(), indices, "ops entry max indices");
  expect_equal(d_grad_input.download(), grad_input, "ops entry max grad_input");
}

TEST(CudaPooling, MaxPoolWide64BitKernelsMatchCpuExactly) {
  SUBLET_SKIP_WITHOUT_GPU("the 64-bit max pooling kernels");
  check_max<float>(pool(3, 2, 1, 1), "wide float 3x3 s2 p1", cuda::PoolIndexing::Wide);
  check_max<float>(pool(2, 2, 0, 1), "wide float 2x2 s2", cuda::PoolIndexing::Wide);
  check_max<float>(pool(3, 1, 1, 2), "wide float 3x3 s1 p1 dilation 2", cuda::PoolIndexing::Wide);
  check_max<double>(pool(3, 2, 1, 1), "wide double 3x3 s2 p1", cuda::PoolIndexing::Wide);
}

TEST(CudaPooling, MaxPoolOddShapesMatchCpuExactly) {
  SUBLET_SKIP_WITHOUT_GPU("max pooling on uneven shapes");
  // Non-square kernels and strides, strides larger than the kernel (inputs no window covers),
  // and one-pixel planes.
  Pool2dShape s;
  s.batch = 3, s.channels = 5, s.in_height = 13, s.in_width = 17;
  s.kernel_h = 3, s.kernel_w = 2, s.stride_h = 2, s.stride_w = 3, s.pad_h = 1, s.pad_w = 1;
  check_max<float>(s, "float 3x2 s(2,3) p(1,1) on 13x17");
  check_max<float>(s, "wide float 3x2 s(2,3) p(1,1) on 13x17", cuda::PoolIndexing::Wide);
  s.kernel_h = 2, s.kernel_w = 2, s.stride_h = 3, s.stride_w = 4, s.pad_h = 0, s.pad_w = 1;
  check_max<double>(s, "double 2x2 s(3,4) p(0,1): gaps between windows");
  check_max<double>(s, "wide double 2x2 s(3,4) p(0,1)", cuda::PoolIndexing::Wide);
  Pool2dShape tiny;
  tiny.batch = 2, tiny.channels = 2, tiny.in_height = 1, tiny.in_width = 1;
  tiny.kernel_h = 1, tiny.kernel_w = 1, tiny.stride_h = 1, tiny.stride_w = 1;
  check_max<float>(tiny, "float 1x1 planes");
}

TEST(CudaPooling, MaxPoolResNetStemMatchesCpuExactly) {
  SUBLET_SKIP_WITHOUT_GPU("max pooling on the ResNet stem's shape");
  // ResNet's stem pooling (3x3, stride 2, padding 1, 112x112 -> 56x56) at batch 16:
  // 12.8M input elements (> 2^23), the shape the ResNet-50 step profile measures at batch 64.
  Pool2dShape s;
  s.batch = 16, s.channels = 64, s.in_height = 112, s.in_width = 112;
  s.kernel_h = 3, s.kernel_w = 3, s.stride_h = 2, s.stride_w = 2, s.pad_h = 1, s.pad_w = 1;
  check_max<float>(s, "ResNet stem float");
}

TEST(CudaPooling, AvgPoolMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("average pooling forward/backward");
  for (bool include_pad : {true, false}) {
    const std::string label = include_pad ? " (count padding)" : " (real elements only)";
    check_avg<float>(pool(3, 2, 1, 1), include_pad, "float 3x3 s2 p1" + label);
    check_avg<float>(pool(3, 1, 1, 1), include_pad, "float 3x3 s1 p1" + label);
    check_avg<double>(pool(2, 2, 1, 1), include_pad, "double 2x2 s2 p1" + label);
  }
}

TEST(CudaPooling, AdaptiveAvgPoolMatchesCpu) {
  SUBLET_SKIP_WITHOUT_GPU("adaptive average pooling");
  check_adaptive<float>(1, 1, "float global");
  check_adaptive<float>(3, 4, "float 3x4 (uneven, overlapping windows)");
  check_adaptive<double>(4, 3, "double 4x3");
}
