#include "ops/cuda/handles.h"

#include <map>

#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

// Owns the handles of one thread. Destroyed at thread exit; for the main thread that is before
// the CUDA runtime's own teardown (thread-local objects go before statics and atexit handlers).
struct ThreadHandles {
  std::map<int, cublasHandle_t> cublas;
  std::map<int, cudnnHandle_t> cudnn;
  ~ThreadHandles() {
    // Errors are ignored here: a destructor must not throw and nothing can be done about them.
    for (auto& [device, handle] : cublas) cublasDestroy(handle);
    for (auto& [device, handle] : cudnn) cudnnDestroy(handle);
  }
};

ThreadHandles& thread_handles() {
  thread_local ThreadHandles handles;
  return handles;
}

}  // namespace

std::size_t cublas_workspace_bytes(int device_index) {
  thread_local std::map<int, std::size_t> bytes_by_device;
  auto found = bytes_by_device.find(device_index);
  if (found != bytes_by_device.end()) return found->second;
  int major = 0;
  SUBLET_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index));
  const std::size_t bytes = (major >= 9 ? 32u : 4u) * 1024u * 1024u;
  bytes_by_device.emplace(device_index, bytes);
  return bytes;
}

CublasLease cublas_for(const Context& ctx) { return cublas_for(ctx, cublas_workspace_bytes(ctx.device.index)); }

CublasLease cublas_for(const Context& ctx, std::size_t workspace_bytes) {
  auto& handles = thread_handles().cublas;
  auto found = handles.find(ctx.device.index);
  if (found == handles.end()) {
    memory::CudaDeviceGuard device(ctx.device);  // cublasCreate binds the handle to the current device
    cublasHandle_t handle = nullptr;
    SUBLET_CUBLAS_CHECK(cublasCreate(&handle));
    // Full float32 precision (no TF32 tensor-core rounding), so GPU results match the CPU's.
    const cublasStatus_t math = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    if (math != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(handle);
      SUBLET_CUBLAS_CHECK(math);
    }
    found = handles.emplace(ctx.device.index, handle).first;
  }
  CublasLease lease;
  lease.handle = found->second;
  // cublasSetStream resets the workspace to the default pool: set the stream first.
  SUBLET_CUBLAS_CHECK(cublasSetStream(lease.handle, stream_of(ctx.stream)));
  if (workspace_bytes > 0) lease.workspace = ctx.workspace(workspace_bytes);
  SUBLET_CUBLAS_CHECK(cublasSetWorkspace(lease.handle, lease.workspace.get(), workspace_bytes));
  return lease;
}

cudnnHandle_t cudnn_for(const Context& ctx) {
  auto& handles = thread_handles().cudnn;
  auto found = handles.find(ctx.device.index);
  if (found == handles.end()) {
    memory::CudaDeviceGuard device(ctx.device);
    cudnnHandle_t handle = nullptr;
    SUBLET_CUDNN_CHECK(cudnnCreate(&handle));
    found = handles.emplace(ctx.device.index, handle).first;
  }
  SUBLET_CUDNN_CHECK(cudnnSetStream(found->second, stream_of(ctx.stream)));
  return found->second;
}

}  // namespace sublet::ops::cuda
