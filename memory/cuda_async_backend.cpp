#include "memory/cuda_async_backend.h"

#include <cuda_runtime_api.h>

#include <cstdint>

#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"
#include "memory/current_stream.h"

namespace sublet::memory {

CudaAsyncBackend::CudaAsyncBackend(int device_index) : CudaBackend(device_index) {
  cudaMemPool_t pool = nullptr;
  SUBLET_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_index));
  std::uint64_t keep_everything = UINT64_MAX;
  SUBLET_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
}

void* CudaAsyncBackend::allocate(std::size_t bytes) {
  // The legacy default stream (nullptr) means the current device's: make it this backend's.
  CudaDeviceGuard guard(device().index);
  void* ptr = nullptr;
  const auto stream = static_cast<cudaStream_t>(current_stream(device()));
  const cudaError_t status = cudaMallocAsync(&ptr, bytes, stream);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  SUBLET_CUDA_CHECK(status);
  return ptr;
}

void CudaAsyncBackend::deallocate(void* ptr, std::size_t /*bytes*/) {
  CudaDeviceGuard guard(device().index);
  SUBLET_CUDA_CHECK(cudaFreeAsync(ptr, static_cast<cudaStream_t>(current_stream(device()))));
}

}  // namespace sublet::memory
