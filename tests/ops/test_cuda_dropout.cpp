// Dropout on the GPU uses the same counter-based mask as the CPU: for the same (seed, offset)
// the outputs are bit-identical, forward and backward.
#include <gtest/gtest.h>

#include "cuda_test_support.h"
#include "ops/dropout.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

template <typename T>
void check(std::int64_t numel, double p, std::uint64_t seed, std::uint64_t offset, const std::string& what) {
  const auto input = random_values<T>(numel, 121, 0.5, 1.5);  // never 0: a zero output means dropped
  const DType dtype = DTypeOf<T>::value;
  std::vector<T> out(numel), grad(numel);
  dropout_forward(Context::for_device(Device::cpu()), numel, dtype, input.data(), p, seed, offset, out.data());
  dropout_backward(Context::for_device(Device::cpu()), numel, dtype, input.data(), p, seed, offset, grad.data());
  DeviceBuffer<T> d_input(input), d_out(numel), d_grad(numel);
  dropout_forward(gpu_context(), numel, dtype, d_input.get(), p, seed, offset, d_out.get());
  dropout_backward(gpu_context(), numel, dtype, d_input.get(), p, seed, offset, d_grad.get());
  expect_equal(d_out.download(), out, what + " forward");
  expect_equal(d_grad.download(), grad, what + " backward");
}

}  // namespace

TEST(CudaDropout, MaskIsIdenticalToTheCpuMask) {
  SUBLET_SKIP_WITHOUT_GPU("dropout mask against the CPU");
  check<float>(10007, 0.3, 42, 0, "float p=0.3");
  check<float>(10007, 0.3, 42, 123456789, "float p=0.3 with offset");
  check<double>(4096, 0.5, 7, 99, "double p=0.5");
  check<float>(1000, 0.0, 42, 0, "p=0 keeps everything");
  check<float>(1000, 1.0, 42, 0, "p=1 drops everything");
}
