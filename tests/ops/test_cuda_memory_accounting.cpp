// Every byte of device memory the CUDA kernels use comes from the caching allocator:
// workspaces (cuDNN convolution, cuBLAS) show in the statistics while the op runs and are
// returned when it returns, and the device's own free-memory count moves exactly as much as
// the allocator's reserved bytes (cudaMemGetInfo is coarse, 2 MiB pages, but any cudaMalloc
// behind the allocator's back would show as a difference).
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <map>
#include <vector>

#include "cuda_test_support.h"
#include "memory/cuda_check.h"
#include "ops/batch_norm.h"
#include "ops/conv2d.h"
#include "ops/matmul.h"
#include "tests/gpu_skip.h"

using namespace sublet;
using namespace sublet::ops;
using namespace sublet::ops::testing;

namespace {

struct ConvBuffers {
  Conv2dShape shape;
  DeviceBuffer<float> input, weight, output, grad_input, grad_weight;
  explicit ConvBuffers(const Conv2dShape& s)
      : shape(s),
        input(random_values<float>(s.input_numel(), 71)),
        weight(random_values<float>(s.weight_numel(), 72)),
        output(s.output_numel()),
        grad_input(s.input_numel()),
        grad_weight(s.weight_numel()) {}
  void run() {
    conv2d_forward(gpu_context(), shape, DType::Float32, input.get(), weight.get(), nullptr, output.get());
    conv2d_backward_input(gpu_context(), shape, DType::Float32, output.get(), weight.get(), grad_input.get());
    conv2d_backward_weight(gpu_context(), shape, DType::Float32, output.get(), input.get(), grad_weight.get(), nullptr);
  }
};

Conv2dShape resnet_like() {
  Conv2dShape s;
  s.batch = 8, s.in_channels = 32, s.in_height = 32, s.in_width = 32;
  s.out_channels = 32, s.kernel_h = 3, s.kernel_w = 3, s.pad_h = 1, s.pad_w = 1;
  return s;
}

std::size_t device_free_bytes() {
  std::size_t free_bytes = 0, total = 0;
  SUBLET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

}  // namespace

TEST(CudaMemoryAccounting, ConvWorkspaceIsReturnedWhenTheOpReturns) {
  SUBLET_SKIP_WITHOUT_GPU("conv2d workspace accounting");
  ConvBuffers conv(resnet_like());
  conv.run();  // first call: handles, algorithm choice
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  const std::size_t allocated = memory_allocated(gpu());
  // Every workspace block taken during the op must have been handed back when it returns.
  std::vector<memory::AllocatorEvent> events;
  memory::allocator_for(gpu()).set_observer([&](const memory::AllocatorEvent& e) { events.push_back(e); });
  conv.run();
  memory::allocator_for(gpu()).set_observer({});
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(memory_allocated(gpu()), allocated) << "a conv2d workspace outlived its call";
  std::map<std::uintptr_t, int> live_workspaces;
  for (const auto& e : events) {
    if (e.category != memory::BlockCategory::Workspace) continue;
    if (e.kind == memory::AllocatorEventKind::Alloc) ++live_workspaces[e.address];
    if (e.kind == memory::AllocatorEventKind::FreeRequested) --live_workspaces[e.address];
  }
  for (const auto& [address, live] : live_workspaces) EXPECT_EQ(live, 0) << "workspace block at " << address;
}

TEST(CudaMemoryAccounting, CublasWorkspaceComesFromTheAllocator) {
  SUBLET_SKIP_WITHOUT_GPU("cuBLAS workspace accounting");
  const std::int64_t n = 64;
  DeviceBuffer<float> a(random_values<float>(n * n, 73)), b(random_values<float>(n * n, 74)), out(n * n);
  const MatmulGeometry g{1, n, n, n, 0, n, 1, 0, n, 1};
  matmul(gpu_context(), DType::Float32, g, out.get(), a.get(), b.get());
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  const std::size_t allocated = memory_allocated(gpu());
  reset_peak_memory_stats(gpu());
  matmul(gpu_context(), DType::Float32, g, out.get(), a.get(), b.get());
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(memory_allocated(gpu()), allocated) << "the cuBLAS workspace outlived its call";
  // The workspace (4 MiB, or 32 MiB from sm_90 on) was held from the allocator during the call.
  EXPECT_GE(max_memory_allocated(gpu()), allocated + 4u * 1024 * 1024);
}

TEST(CudaMemoryAccounting, NoDeviceMemoryOutsideTheAllocator) {
  SUBLET_SKIP_WITHOUT_GPU("device memory only via the allocator");
  ConvBuffers conv(resnet_like());
  const std::int64_t n = 96;
  DeviceBuffer<float> a(random_values<float>(n * n, 75)), b(random_values<float>(n * n, 76)), out(n * n);
  const MatmulGeometry g{1, n, n, n, 0, n, 1, 0, n, 1};
  auto run_all = [&] {
    conv.run();
    matmul(gpu_context(), DType::Float32, g, out.get(), a.get(), b.get());
    SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  };
  run_all();  // warm-up: handles, lazily loaded kernels and cuDNN's own state are set up here
  empty_cache(gpu());
  const std::size_t free_before = device_free_bytes();
  const std::size_t reserved_before = memory_reserved(gpu());
  const std::int64_t device_allocs_before = memory_stats(gpu()).at("num_device_alloc");
  run_all();
  const std::size_t free_after = device_free_bytes();
  const std::size_t reserved_after = memory_reserved(gpu());
  EXPECT_GT(memory_stats(gpu()).at("num_device_alloc"), device_allocs_before)
      << "the workspaces should have needed new segments after empty_cache";
  const double device_used = static_cast<double>(free_before) - static_cast<double>(free_after);
  const double allocator_took = static_cast<double>(reserved_after) - static_cast<double>(reserved_before);
  EXPECT_NEAR(device_used, allocator_took, 2.0 * 1024 * 1024)
      << "device memory moved by " << device_used << " bytes, the allocator reserved " << allocator_took;
}
