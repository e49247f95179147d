// The CUDA backend's device services (ops/device_services.h) that are not kernels: the
// stream-capture query and the external profiler's range. Its byte copies and scalar uploads
// live beside their kernels (ops/cuda/copy.cu, ops/cuda/optim_update.cu).
#include "ops/cuda/device_services_cuda.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "memory/cuda_check.h"

namespace sublet::ops::cuda {

bool stream_is_capturing(const Context& ctx) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SUBLET_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(ctx.stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

void profiler_start() { SUBLET_CUDA_CHECK(cudaProfilerStart()); }

void profiler_stop() { SUBLET_CUDA_CHECK(cudaProfilerStop()); }

}  // namespace sublet::ops::cuda
