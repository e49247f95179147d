#include "ops/stream_capture.h"

#ifdef SUBLET_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "memory/cuda_check.h"
#endif

namespace sublet::ops {

bool stream_is_capturing(const Context& ctx) {
#ifdef SUBLET_HAVE_CUDA
  if (!ctx.device.is_cuda()) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SUBLET_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(ctx.stream), &status));
  return status != cudaStreamCaptureStatusNone;
#else
  (void)ctx;
  return false;
#endif
}

}  // namespace sublet::ops
