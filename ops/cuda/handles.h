#pragma once
// One cuBLAS and one cuDNN handle per (thread, device), created on first use and destroyed when
// the thread ends. Handles are not thread-safe, so a thread never shares one; they are costly
// to create, so a thread keeps its own. Each lease binds the handle to the context's stream.
// cuBLAS gets its workspace from the caching allocator for the duration of the lease (instead
// of the pool cublasCreate would cudaMalloc), so the workspace shows in the memory statistics.
#include <cublas_v2.h>
#include <cudnn.h>

#include "memory/caching_allocator.h"
#include "ops/context.h"

namespace sublet::ops::cuda {

// Keep the lease alive until the last cuBLAS call that uses it has been enqueued: the
// workspace returns to the allocator with the lease, stream-ordered like any block.
struct CublasLease {
  cublasHandle_t handle = nullptr;
  memory::ScopedBlock workspace;
};

// Call with ctx.device current (memory::CudaDeviceGuard).
CublasLease cublas_for(const Context& ctx);
cudnnHandle_t cudnn_for(const Context& ctx);

// Workspace cuBLAS recommends for the device: 32 MiB from Hopper (sm_90) on, 4 MiB before.
std::size_t cublas_workspace_bytes(int device_index);

}  // namespace sublet::ops::cuda
