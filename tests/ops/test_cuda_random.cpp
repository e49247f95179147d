// Random fills on the GPU give the same values as on the CPU for the same seed (drawn on the
// host from the same engine), and leave the engine in the same state.
#include <gtest/gtest.h>

#include "cuda_test_support.h"
#include "ops/random.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

TEST(CudaRandom, SameSeedSameValuesOnBothDevices) {
  SUBLET_SKIP_WITHOUT_GPU("uniform/normal fills against the CPU");
  const std::int64_t count = 1001;  // odd: the last Box-Muller pair is cut
  std::mt19937_64 cpu_engine(1234), gpu_engine(1234);
  std::vector<float> cpu_uniform(count), cpu_normal(count);
  fill_uniform(Context::for_device(Device::cpu()), DType::Float32, cpu_uniform.data(), count, -0.5, 2.0, cpu_engine);
  fill_normal(Context::for_device(Device::cpu()), DType::Float32, cpu_normal.data(), count, 0.1, 0.02, cpu_engine);
  DeviceBuffer<float> uniform(count), normal(count);
  fill_uniform(gpu_context(), DType::Float32, uniform.get(), count, -0.5, 2.0, gpu_engine);
  fill_normal(gpu_context(), DType::Float32, normal.get(), count, 0.1, 0.02, gpu_engine);
  expect_equal(uniform.download(), cpu_uniform, "uniform");
  expect_equal(normal.download(), cpu_normal, "normal");
  EXPECT_EQ(gpu_engine(), cpu_engine()) << "the engines advanced differently";

  std::vector<double> cpu_double(count);
  fill_normal(Context::for_device(Device::cpu()), DType::Float64, cpu_double.data(), count, 0, 1, cpu_engine);
  DeviceBuffer<double> gpu_double(count);
  fill_normal(gpu_context(), DType::Float64, gpu_double.get(), count, 0, 1, gpu_engine);
  expect_equal(gpu_double.download(), cpu_double, "double normal");
}
