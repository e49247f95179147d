#pragma once
// The event half of the Backend contract (backend.h) for the backends whose events are CUDA
// events (CudaBackend, PinnedHostBackend): one definition of "has it completed" and of destroy.
#include "memory/backend.h"
#include "memory/cuda_check.h"

namespace sublet::memory {

// True once every work recorded before the event has finished; a pending event is not an error.
inline bool cuda_event_completed(EventHandle event) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // clears the sticky "not ready" so later checks do not see it
    return false;
  }
  SUBLET_CUDA_CHECK(status);
  return true;
}

inline void destroy_cuda_event(EventHandle event) { SUBLET_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event))); }

}  // namespace sublet::memory
