// The caching allocator on a real GPU: CudaBackend, expandable segments through the driver's
// virtual memory API, record_stream across two streams (stream-ordered reuse), and a real out-of-memory error.
#include <gtest/gtest.h>

#include "tests/gpu_skip.h"

#include "memory/registry.h"

#ifdef SUBLET_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "memory/cuda_backend.h"
#include "memory/cuda_check.h"
#include "core/errors.h"
#endif

using namespace sublet::memory;

#define REQUIRE_GPU() SUBLET_SKIP_WITHOUT_GPU("the real GPU backend")

#ifdef SUBLET_HAVE_CUDA
// Runs everywhere a CUDA build does, GPU or not: what each answer of cudaGetDeviceCount means.
TEST(CudaDeviceCount, NoGpuIsZeroAndABrokenGpuIsAnError) {
  EXPECT_EQ(CudaBackend::device_count_from(cudaSuccess, 2), 2);
  EXPECT_EQ(CudaBackend::device_count_from(cudaErrorNoDevice, 0), 0);
  EXPECT_EQ(CudaBackend::device_count_from(cudaErrorInsufficientDriver, 0), 0);  // no driver: CI's machines
  try {
    CudaBackend::device_count_from(cudaErrorDevicesUnavailable, 0);
    ADD_FAILURE() << "a broken GPU host passed for a machine without a GPU";
  } catch (const sublet::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaGetDeviceCount failed with cudaErrorDevicesUnavailable"), std::string::npos)
        << e.what();
  }
}
#endif

#ifdef SUBLET_HAVE_CUDA
namespace {

std::unique_ptr<CachingAllocator> gpu_allocator(const std::string& conf = "") {
  return std::make_unique<CachingAllocator>(std::make_unique<CudaBackend>(0), AllocatorConfig::parse(conf));
}

// Fills `bytes` on the device and reads back the last byte: the memory is real and mapped.
unsigned char touch(void* ptr, std::size_t bytes, int value) {
  SUBLET_CUDA_CHECK(cudaMemset(ptr, value, bytes));
  unsigned char last = 0;
  SUBLET_CUDA_CHECK(cudaMemcpy(&last, static_cast<char*>(ptr) + bytes - 1, 1, cudaMemcpyDeviceToHost));
  return last;
}

std::size_t device_free_bytes() {
  std::size_t free_bytes = 0, total = 0;
  SUBLET_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

}  // namespace
#endif

TEST(CudaAllocator, TwoStepReleaseOnTheDevice) {
  REQUIRE_GPU();
#ifdef SUBLET_HAVE_CUDA
  auto allocator = gpu_allocator();
  const std::size_t free_before = device_free_bytes();
  Block* b = allocator->allocate(256 * kMiB);
  EXPECT_EQ(touch(b->ptr, 256 * kMiB, 7), 7);
  EXPECT_EQ(allocator->memory_allocated(), 256 * kMiB);
  allocator->free(b);
  EXPECT_EQ(allocator->memory_allocated(), 0u);
  EXPECT_EQ(allocator->memory_reserved(), 256 * kMiB);
  EXPECT_LT(device_free_bytes(), free_before - 200 * kMiB);  // the driver still sees it in use
  allocator->empty_cache();
  EXPECT_EQ(allocator->memory_reserved(), 0u);
  EXPECT_GT(device_free_bytes(), free_before - 64 * kMiB);
#endif
}

TEST(CudaAllocator, ExpandableSegmentsGrowAndShrink) {
  REQUIRE_GPU();
#ifdef SUBLET_HAVE_CUDA
  auto allocator = gpu_allocator("expandable_segments:True");
  std::vector<Block*> blocks;
  for (int i = 0; i < 6; ++i) {
    blocks.push_back(allocator->allocate(100 * kMiB));
    EXPECT_EQ(touch(blocks.back()->ptr, 100 * kMiB, i + 1), i + 1);
  }
  EXPECT_EQ(static_cast<char*>(blocks[5]->ptr), static_cast<char*>(blocks[0]->ptr) + 500 * kMiB);  // one range
  EXPECT_EQ(allocator->memory_reserved(), 600 * kMiB);
  const std::size_t free_full = device_free_bytes();
  for (int i = 3; i < 6; ++i) allocator->free(blocks[i]);
  allocator->empty_cache();
  EXPECT_EQ(allocator->memory_reserved(), 300 * kMiB);  // reserved follows the mapped pages
  EXPECT_GT(device_free_bytes(), free_full + 250 * kMiB);
  EXPECT_EQ(touch(blocks[2]->ptr, 100 * kMiB, 9), 9);  // the kept part is still mapped
  Block* regrown = allocator->allocate(200 * kMiB);
  EXPECT_EQ(touch(regrown->ptr, 200 * kMiB, 3), 3);
  EXPECT_EQ(allocator->memory_reserved(), 500 * kMiB);
  allocator->free(regrown);
  for (int i = 0; i < 3; ++i) allocator->free(blocks[i]);
  allocator->empty_cache();
  EXPECT_EQ(allocator->memory_reserved(), 0u);
  EXPECT_EQ(allocator->memory_stats().at("segment.all.current"), 0);
#endif
}

// Stream-ordered reuse: a block freed while another stream still writes it is handed back to
// its own stream at once, behind a device-side wait on the other stream's event. The side stream
// is held by a host function until the test lets it go, so if allocate() waited on the host the
// test would hang (a watchdog lets it go after 10 s and the elapsed time shows it); if the
// allocator did not order the reuse, the reusing stream's write would land first and be
// overwritten by the side stream's.
TEST(CudaAllocator, RecordStreamReuseIsOrderedOnTheDeviceWithoutAHostWait) {
  REQUIRE_GPU();
#ifdef SUBLET_HAVE_CUDA
  auto allocator = gpu_allocator();
  cudaStream_t side = nullptr;
  cudaStream_t compute = nullptr;
  SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  std::atomic<bool> release{false};
  SUBLET_CUDA_CHECK(cudaLaunchHostFunc(side, [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }, &release));
  std::thread watchdog([&release] {
    for (int i = 0; i < 10000 && !release.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    release = true;
  });
  constexpr std::size_t kBytes = 8 * kMiB;
  Block* b = allocator->allocate(kBytes, compute);
  void* first = b->ptr;
  SUBLET_CUDA_CHECK(cudaMemsetAsync(b->ptr, 1, kBytes, side));  // queued behind the held host function
  allocator->record_stream(b, side);
  allocator->free(b);
  const auto started = std::chrono::steady_clock::now();
  Block* again = allocator->allocate(kBytes, compute);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_FALSE(release.load()) << "allocate() waited on the host for the side stream";
  EXPECT_LT(seconds, 1.0);
  EXPECT_EQ(again->ptr, first);  // reused at once
  SUBLET_CUDA_CHECK(cudaMemsetAsync(again->ptr, 2, kBytes, compute));  // must run after the side's write
  release = true;
  watchdog.join();
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(compute));
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(side));
  std::vector<unsigned char> host(kBytes);
  SUBLET_CUDA_CHECK(cudaMemcpy(host.data(), again->ptr, kBytes, cudaMemcpyDeviceToHost));
  std::size_t wrong = 0;
  for (unsigned char v : host) wrong += v != 2;
  EXPECT_EQ(wrong, 0u) << "the reusing stream's write ran before the side stream's";
  const auto stats = allocator->memory_stats();
  EXPECT_EQ(stats.at("num_stream_ordered_reuses"), 1);
  EXPECT_EQ(stats.at("num_sync_all_streams"), 0);
  allocator->free(again);
  SUBLET_CUDA_CHECK(cudaStreamDestroy(side));
  SUBLET_CUDA_CHECK(cudaStreamDestroy(compute));
#endif
}

TEST(CudaAllocator, RealOutOfMemoryIsCaughtAndTheProcessGoesOn) {
  REQUIRE_GPU();
#ifdef SUBLET_HAVE_CUDA
  auto allocator = gpu_allocator();
  std::vector<Block*> held;
  std::string message;
  try {
    for (int i = 0; i < 1000; ++i) held.push_back(allocator->allocate(std::size_t{8} << 30));  // 8 GiB each
  } catch (const sublet::OutOfMemoryError& e) {
    message = e.what();
  }
  ASSERT_FALSE(message.empty()) << "expected the device to run out after " << held.size() << " x 8 GiB";
  std::cout << "after " << held.size() << " x 8 GiB: " << message << "\n";
  EXPECT_NE(message.find("Tried to allocate 8.00 GiB"), std::string::npos) << message;
  EXPECT_NE(message.find("total capacity of"), std::string::npos) << message;
  EXPECT_NE(message.find("GiB is allocated by tensors"), std::string::npos) << message;
  EXPECT_EQ(allocator->memory_stats().at("num_ooms"), 1);
  for (Block* b : held) allocator->free(b);
  allocator->empty_cache();
  EXPECT_EQ(allocator->memory_reserved(), 0u);
  Block* after = allocator->allocate(kMiB);  // the process and the allocator keep working
  EXPECT_EQ(touch(after->ptr, kMiB, 5), 5);
  allocator->free(after);
#endif
}

TEST(CudaAllocator, RegistryServesTheDefaultDevice) {
  REQUIRE_GPU();
#ifdef SUBLET_HAVE_CUDA
  EXPECT_EQ(default_device(), sublet::Device::cuda(0));
  CachingAllocator& a = allocator_for(sublet::Device::cuda(0));
  const std::size_t before = sublet::memory_allocated();
  Block* b = a.allocate(3 * kMiB);
  EXPECT_EQ(sublet::memory_allocated(), before + 3 * kMiB);
  a.free(b);
  EXPECT_EQ(sublet::memory_allocated(), before);
#endif
}
