#include "memory/cuda_backend.h"

#include <string>

#include <cuda_runtime_api.h>

#include "memory/cuda_check.h"
#include "memory/cuda_events.h"
#include "memory/cuda_device_guard.h"
#include "memory/cuda_driver.h"
#include "core/errors.h"

namespace sublet::memory {
namespace {

CUmemAllocationProp physical_memory_properties(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

int CudaBackend::device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) cudaGetLastError();
  return device_count_from(status, count);
}

int CudaBackend::device_count_from(cudaError_t status, int count) {
  if (status == cudaSuccess) return count;
  // No GPU, or no driver at all: a machine without a GPU, where sublet runs on the CPU.
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary) return 0;
  // Anything else is a GPU host that is broken (driver/library mismatch, a device in a bad
  // state): said here, rather than passing for "no GPU" (every GPU test would then skip).
  throw CudaError(std::string("cudaGetDeviceCount failed with ") + cudaGetErrorName(status) + " (" +
                  cudaGetErrorString(status) +
                  "): the GPU or its driver is not usable; fix the driver, or hide the GPUs with CUDA_VISIBLE_DEVICES= "
                  "to run on the CPU");
}

CudaBackend::CudaBackend(int device_index) : device_index_(device_index) {
  CudaDeviceGuard guard(device_index_);
  SUBLET_CUDA_CHECK(cudaFree(nullptr));  // creates the primary context the driver API calls use
  CUmemAllocationProp prop = physical_memory_properties(device_index_);
  SUBLET_CU_CHECK(driver_api().mem_get_allocation_granularity(&granularity_, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

CudaBackend::~CudaBackend() = default;

void* CudaBackend::allocate(std::size_t bytes) {
  CudaDeviceGuard guard(device_index_);
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // out of memory is an answer, not an error: the allocator reports it
    return nullptr;
  }
  SUBLET_CUDA_CHECK(status);
  return ptr;
}

void CudaBackend::deallocate(void* ptr, std::size_t /*bytes*/) {
  CudaDeviceGuard guard(device_index_);
  SUBLET_CUDA_CHECK(cudaFree(ptr));
}

MemoryInfo CudaBackend::memory_info() const {
  CudaDeviceGuard guard(device_index_);
  MemoryInfo info;
  SUBLET_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

void* CudaBackend::reserve(std::size_t bytes) {
  CudaDeviceGuard guard(device_index_);
  CUdeviceptr base = 0;
  const CUresult status = driver_api().mem_address_reserve(&base, bytes, 0, 0, 0);
  if (status == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  SUBLET_CU_CHECK(status);
  return reinterpret_cast<void*>(base);
}

void CudaBackend::release(void* base, std::size_t bytes) {
  CudaDeviceGuard guard(device_index_);
  SUBLET_CU_CHECK(driver_api().mem_address_free(reinterpret_cast<CUdeviceptr>(base), bytes));
}

bool CudaBackend::map(void* address, std::size_t bytes) {
  CudaDeviceGuard guard(device_index_);
  const CUmemAllocationProp prop = physical_memory_properties(device_index_);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const auto begin = reinterpret_cast<CUdeviceptr>(address);
  std::lock_guard lock(handles_mutex_);
  for (CUdeviceptr chunk = begin; chunk < begin + bytes; chunk += granularity_) {
    CUmemGenericAllocationHandle handle{};
    const CUresult status = driver_api().mem_create(&handle, granularity_, &prop, 0);
    if (status == CUDA_ERROR_OUT_OF_MEMORY) {
      unmap_chunks(begin, chunk);  // all or nothing
      return false;
    }
    SUBLET_CU_CHECK(status);
    SUBLET_CU_CHECK(driver_api().mem_map(chunk, granularity_, 0, handle, 0));
    SUBLET_CU_CHECK(driver_api().mem_set_access(chunk, granularity_, &access, 1));
    handles_[chunk] = handle;
  }
  return true;
}

void CudaBackend::unmap(void* address, std::size_t bytes) {
  CudaDeviceGuard guard(device_index_);
  // Work queued on any stream may still touch these pages.
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
  const auto begin = reinterpret_cast<CUdeviceptr>(address);
  std::lock_guard lock(handles_mutex_);
  unmap_chunks(begin, begin + bytes);
}

void CudaBackend::unmap_chunks(CUdeviceptr begin, CUdeviceptr end) {
  for (CUdeviceptr chunk = begin; chunk < end; chunk += granularity_) {
    auto it = handles_.find(chunk);
    if (it == handles_.end()) continue;
    SUBLET_CU_CHECK(driver_api().mem_unmap(chunk, granularity_));
    SUBLET_CU_CHECK(driver_api().mem_release(it->second));
    handles_.erase(it);
  }
}

EventHandle CudaBackend::record(StreamHandle stream) {
  CudaDeviceGuard guard(device_index_);
  cudaEvent_t event = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  SUBLET_CUDA_CHECK(cudaEventRecord(event, static_cast<cudaStream_t>(stream)));
  return event;
}

bool CudaBackend::completed(EventHandle event) { return cuda_event_completed(event); }

void CudaBackend::destroy(EventHandle event) { destroy_cuda_event(event); }

void CudaBackend::make_stream_wait(StreamHandle stream, EventHandle event) {
  CudaDeviceGuard guard(device_index_);
  SUBLET_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

void CudaBackend::synchronize_device() {
  CudaDeviceGuard guard(device_index_);
  SUBLET_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace sublet::memory
