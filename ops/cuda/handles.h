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
#include "ops/cuda/cuda_checks.h"

namespace sublet::ops::cuda {

// Keep the lease alive until the last cuBLAS call that uses it has been enqueued: the
// workspace returns to the allocator with the lease, stream-ordered like any block.
struct CublasLease {
  cublasHandle_t handle = nullptr;
  memory::ScopedBlock workspace;
};

// Call with ctx.device current (memory::CudaDeviceGuard). The lease's workspace is
// cublas_workspace_bytes(), or `workspace_bytes` (0: none, cuBLAS then picks kernels that need
// none).
CublasLease cublas_for(const Context& ctx);
CublasLease cublas_for(const Context& ctx, std::size_t workspace_bytes);
cudnnHandle_t cudnn_for(const Context& ctx);

// Workspace cuBLAS recommends for the device: 32 MiB from Hopper (sm_90) on, 4 MiB before.
std::size_t cublas_workspace_bytes(int device_index);

// Sets a handle's math mode for one call and puts the handle's own back afterwards (also when
// the call throws): the handle is shared by every cuBLAS call of this thread and device.
class MathModeScope {
 public:
  MathModeScope(cublasHandle_t handle, cublasMath_t mode) : handle_(handle) {
    SUBLET_CUBLAS_CHECK(cublasGetMathMode(handle_, &saved_));
    SUBLET_CUBLAS_CHECK(cublasSetMathMode(handle_, mode));
  }
  ~MathModeScope() { cublasSetMathMode(handle_, saved_); }  // a destructor must not throw
  MathModeScope(const MathModeScope&) = delete;
  MathModeScope& operator=(const MathModeScope&) = delete;

 private:
  cublasHandle_t handle_;
  cublasMath_t saved_ = CUBLAS_DEFAULT_MATH;
};

}  // namespace sublet::ops::cuda
