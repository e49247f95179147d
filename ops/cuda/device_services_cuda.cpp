// The CUDA backend's device services (ops/device_services.h) that are not kernels: the
// stream-capture query, the second stream's fork and join, and the external profiler's range.
// Its byte copies and scalar uploads live beside their kernels (ops/cuda/copy.cu,
// ops/cuda/optim_update.cu).
#include "ops/cuda/device_services_cuda.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <map>

#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"

namespace sublet::ops::cuda {
namespace {

// One second stream per (thread, device, lane), as the library handles (ops/cuda/handles.cpp),
// with the two events that order it against the first. Non-blocking: it must not synchronise with
// the legacy default stream, which a capture forbids. Never destroyed: the CUDA runtime's own
// teardown takes them at exit, and a thread's streams are few.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t forked = nullptr;  // recorded on the first stream, waited for by the second
  cudaEvent_t joined = nullptr;  // recorded on the second stream, waited for by the first
};

SideStream& side_stream_of(Device device, int lane) {
  thread_local std::map<std::pair<int, int>, SideStream> by_device_and_lane;
  SideStream& side = by_device_and_lane[{device.index, lane}];
  if (side.stream == nullptr) {
    memory::CudaDeviceGuard guard(device);
    SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&side.stream, cudaStreamNonBlocking));
    SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&side.forked, cudaEventDisableTiming));
    SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&side.joined, cudaEventDisableTiming));
  }
  return side;
}

}  // namespace

bool stream_is_capturing(const Context& ctx) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SUBLET_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(ctx.stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

StreamHandle fork_stream(const Context& ctx, int lane) {
  SideStream& side = side_stream_of(ctx.device, lane);
  SUBLET_CUDA_CHECK(cudaEventRecord(side.forked, static_cast<cudaStream_t>(ctx.stream)));
  SUBLET_CUDA_CHECK(cudaStreamWaitEvent(side.stream, side.forked, 0));
  return side.stream;
}

void join_stream(const Context& ctx, int lane) {
  SideStream& side = side_stream_of(ctx.device, lane);
  SUBLET_CUDA_CHECK(cudaEventRecord(side.joined, side.stream));
  SUBLET_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(ctx.stream), side.joined, 0));
}

void profiler_start() { SUBLET_CUDA_CHECK(cudaProfilerStart()); }

void profiler_stop() { SUBLET_CUDA_CHECK(cudaProfilerStop()); }

}  // namespace sublet::ops::cuda
