#include "bench/alloc/cuda_allocators.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "memory/cuda_check.h"
#include "core/errors.h"

namespace sublet::bench {

CudaMallocUnderTest::CudaMallocUnderTest(int device_index) {
  SUBLET_CUDA_CHECK(cudaSetDevice(device_index));
}

CudaMallocUnderTest::~CudaMallocUnderTest() {
  for (const auto& entry : sizes_) cudaFree(entry.first);  // only after a failed row
}

AllocationHandle CudaMallocUnderTest::allocate(std::size_t bytes) {
  ++calls_;
  void* ptr = nullptr;
  SUBLET_CUDA_CHECK(cudaMalloc(&ptr, bytes));
  sizes_.emplace(ptr, bytes);
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return ptr;
}

void CudaMallocUnderTest::free(AllocationHandle handle) {
  auto it = sizes_.find(handle);
  if (it == sizes_.end()) throw Error("cudaMalloc baseline: free of a pointer it did not hand out");
  SUBLET_CUDA_CHECK(cudaFree(handle));
  live_bytes_ -= it->second;
  sizes_.erase(it);
}

CudaMallocAsyncUnderTest::CudaMallocAsyncUnderTest(int device_index) {
  SUBLET_CUDA_CHECK(cudaSetDevice(device_index));
  SUBLET_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, device_index));
  SUBLET_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &previous_release_threshold_));
  std::uint64_t keep_everything = std::numeric_limits<std::uint64_t>::max();
  SUBLET_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  // Start each row from an empty pool and a fresh high-water mark, like a fresh sublet allocator.
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  SUBLET_CUDA_CHECK(cudaMemPoolTrimTo(pool_, 0));
  std::uint64_t zero = 0;
  SUBLET_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &zero));
}

CudaMallocAsyncUnderTest::~CudaMallocAsyncUnderTest() {
  // Destructors must not throw: a failure here leaves the pool as it is, nothing worse.
  cudaStreamSynchronize(nullptr);
  cudaMemPoolTrimTo(pool_, 0);
  cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &previous_release_threshold_);
}

AllocationHandle CudaMallocAsyncUnderTest::allocate(std::size_t bytes) {
  void* ptr = nullptr;
  SUBLET_CUDA_CHECK(cudaMallocAsync(&ptr, bytes, nullptr));
  return ptr;
}

void CudaMallocAsyncUnderTest::free(AllocationHandle handle) {
  SUBLET_CUDA_CHECK(cudaFreeAsync(handle, nullptr));
}

std::optional<std::uint64_t> CudaMallocAsyncUnderTest::peak_reserved_bytes() const {
  std::uint64_t high = 0;
  SUBLET_CUDA_CHECK(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemHigh, &high));
  return high;
}

}  // namespace sublet::bench
