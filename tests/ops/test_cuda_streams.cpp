// The current stream: thread-local per device, nullptr by default, set and restored by
// StreamGuard, picked up by ops::Context::for_device, and kernels launched on it give the same
// results as on the default stream.
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <thread>

#include "cuda_test_support.h"
#include "memory/cuda_check.h"
#include "memory/current_stream.h"
#include "ops/elementwise.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

TEST(CudaStreams, CurrentStreamIsThreadLocalAndRestoredByTheGuard) {
  SUBLET_SKIP_WITHOUT_GPU("current stream with a real CUDA stream");
  cudaStream_t stream = nullptr;
  SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  EXPECT_EQ(memory::current_stream(gpu()), nullptr);
  {
    memory::StreamGuard guard(gpu(), stream);
    EXPECT_EQ(memory::current_stream(gpu()), stream);
    EXPECT_EQ(Context::for_device(gpu()).stream, stream);
    StreamHandle seen_by_other_thread = stream;
    std::thread([&] { seen_by_other_thread = memory::current_stream(gpu()); }).join();
    EXPECT_EQ(seen_by_other_thread, nullptr) << "another thread saw this thread's stream";
  }
  EXPECT_EQ(memory::current_stream(gpu()), nullptr);
  EXPECT_EQ(memory::current_stream(Device::cpu()), nullptr);
  SUBLET_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(CudaStreams, KernelsOnANonDefaultStreamMatchCpu) {
  SUBLET_SKIP_WITHOUT_GPU("kernels launched on a user stream");
  cudaStream_t stream = nullptr;
  SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::int64_t n = 1 << 16;
  const auto x = random_values<float>(n, 131), y = random_values<float>(n, 132);
  std::vector<float> expected(n);
  binary(Context::for_device(Device::cpu()), BinaryOp::Mul, DType::Float32, {n}, {expected.data(), {1}},
         {x.data(), {1}}, {y.data(), {1}});
  std::vector<float> result;
  {
    memory::StreamGuard guard(gpu(), stream);
    // Buffers, kernel and copies all on the user stream: copy_bytes must order itself after it.
    DeviceBuffer<float> a(x), b(y), out(n);
    binary(gpu_context(), BinaryOp::Mul, DType::Float32, {n}, {out.get(), {1}}, {a.get(), {1}}, {b.get(), {1}});
    result = out.download();
  }
  expect_equal(result, expected, "product on a non-blocking stream");
  SUBLET_CUDA_CHECK(cudaStreamDestroy(stream));
}
