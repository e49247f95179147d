// Pinned batch buffers: reuse through the free list (no second allocation for the same size),
// the cap on cached buffers, an asynchronous upload that lands the right values and keeps its
// buffer out of circulation until the copy has finished, and the bytes in the pinned
// allocator's statistics.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "core/errors.h"
#include "memory/cuda_check.h"
#include "memory/current_stream.h"
#include "memory/pinned_host.h"
#include "memory/registry.h"
#include "runtime/data/pinned_buffer.h"
#include "runtime/tensor.h"
#include "tests/gpu_skip.h"

namespace sublet {
namespace {

TEST(PinnedBuffer, ReusesReleasedBuffers) {
  SUBLET_SKIP_WITHOUT_GPU("pinned buffer reuse");
  PinnedBatchBuffers pinned(2);
  auto allocate = pinned.allocator();
  float* first = nullptr;
  {
    data::BatchBuffer a = allocate(1000);
    first = a.data();
    a.data()[999] = 1.0f;  // writable over its whole size
  }
  EXPECT_EQ(pinned.cached_buffers(), 1u);
  data::BatchBuffer b = allocate(800);  // fits in the released one
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.size(), 800u);
  EXPECT_EQ(pinned.host_allocations(), 1);
  {
    data::BatchBuffer c = allocate(10), d = allocate(20), e = allocate(30);
  }
  EXPECT_EQ(pinned.cached_buffers(), 2u) << "the cap of two cached buffers";
  EXPECT_EQ(pinned.host_allocations(), 4);
}

TEST(PinnedBuffer, AsyncUploadDeliversTheBatch) {
  SUBLET_SKIP_WITHOUT_GPU("pinned upload");
  const Device gpu = Device::cuda(0);
  PinnedBatchBuffers pinned(4);
  Tensor on_device = Tensor::empty({4096}, TensorOptions().device(gpu));
  float* used = nullptr;
  {
    data::BatchBuffer batch = pinned.allocate(4096);
    std::iota(batch.data(), batch.data() + 4096, 0.0f);
    used = batch.data();
    pinned.copy_to_device_async(batch.data(), on_device.data_ptr(), on_device.nbytes(), gpu,
                                memory::current_stream(gpu));
  }  // released while the copy may still run
  data::BatchBuffer next = pinned.allocate(4096);
  // Either the copy had finished (and the buffer is reused) or a fresh one was made; both are
  // safe, and the uploaded values must be intact.
  if (next.data() == used) {
    EXPECT_EQ(pinned.host_allocations(), 1);
  }
  std::fill(next.data(), next.data() + 4096, -1.0f);
  const auto values = on_device.to(Device::cpu()).to_vector<float>();
  for (int i = 0; i < 4096; i += 511) EXPECT_EQ(values[static_cast<std::size_t>(i)], static_cast<float>(i));
  EXPECT_THROW(pinned.copy_to_device_async(on_device.data<float>(), on_device.data_ptr(), 4, gpu, nullptr),
               ValueError);
}

TEST(PinnedBuffer, BytesShowInThePinnedAllocatorsStatistics) {
  SUBLET_SKIP_WITHOUT_GPU("pinned bytes in the statistics");
  memory::CachingAllocator& pinned_memory = memory::pinned_allocator();
  const auto allocated = [&] { return pinned_memory.memory_stats().at("allocated_bytes.all.current"); };
  const std::int64_t before = allocated();
  constexpr std::size_t kFloats = std::size_t{1} << 20;  // 4 MiB: no rounding in the large pool
  PinnedBatchBuffers pinned(0);                          // nothing cached: a release hands back
  {
    data::BatchBuffer batch = pinned.allocate(kFloats);
    EXPECT_EQ(allocated() - before, static_cast<std::int64_t>(kFloats * sizeof(float)));
    EXPECT_GE(pinned_memory.memory_reserved(), kFloats * sizeof(float));
    EXPECT_NE(pinned_memory.memory_summary().find("pinned-host"), std::string::npos);
  }
  EXPECT_EQ(allocated(), before) << "a released buffer beyond the cap goes back to the pinned allocator";
}

TEST(PinnedBuffer, HandedBackBufferIsNotReusedUnderItsCopy) {
  SUBLET_SKIP_WITHOUT_GPU("pinned reuse after an async copy");
  const Device gpu = Device::cuda(0);
  constexpr std::size_t kFloats = std::size_t{1} << 20;
  // Everything that may synchronise the device happens before the stream is held: the device
  // tensor, and a cached pinned segment large enough for both blocks, so that no cudaHostAlloc
  // (and no device-wide wait) is needed while the copy is pending. (A cudaDeviceSynchronize
  // after the hold waited for the held stream: the test hung.)
  Tensor on_device = Tensor::empty({static_cast<std::int64_t>(kFloats)}, TensorOptions().device(gpu));
  memory::CachingAllocator& pinned_memory = memory::pinned_allocator();
  {
    memory::Block* a = pinned_memory.allocate(kFloats * sizeof(float), memory::pinned_host_stream());
    memory::Block* b = pinned_memory.allocate(kFloats * sizeof(float), memory::pinned_host_stream());
    pinned_memory.free(a);
    pinned_memory.free(b);
  }
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream = nullptr;
  SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The stream waits on the host until `go`, so the copy below is certainly still pending.
  std::atomic<bool> go{false};
  struct Release {
    std::atomic<bool>& go;
    cudaStream_t stream;
    ~Release() { go = true; cudaStreamSynchronize(stream); cudaStreamDestroy(stream); }
  } release{go, stream};
  SUBLET_CUDA_CHECK(cudaLaunchHostFunc(
      stream, [](void* flag) { while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield(); },
      &go));
  PinnedBatchBuffers pinned(0);
  float* used = nullptr;
  {
    data::BatchBuffer batch = pinned.allocate(kFloats);
    std::iota(batch.data(), batch.data() + kFloats, 0.0f);
    used = batch.data();
    pinned.copy_to_device_async(batch.data(), on_device.data_ptr(), on_device.nbytes(), gpu, stream);
  }  // handed back to the pinned allocator while the copy waits
  memory::Block* other = pinned_memory.allocate(kFloats * sizeof(float), memory::pinned_host_stream());
  EXPECT_NE(other->ptr, static_cast<void*>(used)) << "the allocator handed out bytes an async copy still reads";
  std::fill_n(static_cast<float*>(other->ptr), kFloats, -1.0f);
  go = true;
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(stream));
  pinned_memory.free(other);
  const auto values = on_device.to(Device::cpu()).to_vector<float>();
  for (std::size_t i = 0; i < kFloats; i += 4099) EXPECT_EQ(values[i], static_cast<float>(i));
}

}  // namespace
}  // namespace sublet
