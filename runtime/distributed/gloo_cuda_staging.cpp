#include "runtime/distributed/gloo_cuda_staging.h"

#include "core/errors.h"

#ifdef SUBLET_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <thread>

#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"
#include "runtime/distributed/communication_stream.h"

namespace sublet::distributed {
namespace {

cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }

}  // namespace

GlooCudaStaging::GlooCudaStaging(Device device) : device_(device) {
  if (!device.is_cuda()) throw DeviceError("Gloo's CUDA staging needs a CUDA device, got " + device.str());
  stream_ = communication_stream(device);
  memory::CudaDeviceGuard guard(device_);
  cudaEvent_t event = nullptr;
  SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  ordered_ = event;
}

GlooCudaStaging::~GlooCudaStaging() {
  // Never throws. The stream's copies must be done before their pinned buffers are freed.
  memory::CudaDeviceGuard guard(device_);
  cudaStreamSynchronize(as_stream(stream_));
  for (const Buffer& b : all_) cudaFreeHost(b.host);
  for (void* e : free_events_) cudaEventDestroy(as_event(e));
  if (ordered_) cudaEventDestroy(as_event(ordered_));
}

GlooCudaStaging::Transfer GlooCudaStaging::stage_out(void* device_data, std::size_t bytes, StreamHandle after) {
  memory::CudaDeviceGuard guard(device_);
  Transfer t;
  t.device_data = device_data;
  t.bytes = bytes;
  // The smallest free buffer that holds it; a new one otherwise.
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
  if (best != free_.end()) {
    t.host = best->host;
    free_.erase(best);
  } else {
    void* host = nullptr;
    SUBLET_CUDA_CHECK(cudaHostAlloc(&host, std::max<std::size_t>(bytes, 1), cudaHostAllocDefault));
    all_.push_back({host, std::max<std::size_t>(bytes, 1)});
    t.host = host;
  }
  if (free_events_.empty()) {
    cudaEvent_t event = nullptr;
    SUBLET_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    free_events_.push_back(event);
  }
  t.staged = free_events_.back();
  free_events_.pop_back();
  SUBLET_CUDA_CHECK(cudaEventRecord(as_event(ordered_), as_stream(after)));
  SUBLET_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream_), as_event(ordered_), 0));
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(t.host, device_data, bytes, cudaMemcpyDeviceToHost, as_stream(stream_)));
  SUBLET_CUDA_CHECK(cudaEventRecord(as_event(t.staged), as_stream(stream_)));
  return t;
}

bool GlooCudaStaging::wait_staged(const Transfer& transfer, std::chrono::steady_clock::time_point deadline) const {
  for (auto pause = std::chrono::microseconds(20);; pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
    const cudaError_t state = cudaEventQuery(as_event(transfer.staged));
    if (state == cudaSuccess) return true;
    if (state != cudaErrorNotReady) SUBLET_CUDA_CHECK(state);
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(pause);
  }
}

void GlooCudaStaging::stage_in(Transfer& transfer) {
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(transfer.device_data, transfer.host, transfer.bytes, cudaMemcpyHostToDevice,
                                    as_stream(stream_)));
  discard(transfer);
}

void GlooCudaStaging::discard(Transfer& transfer) {
  for (const Buffer& b : all_)
    if (b.host == transfer.host) free_.push_back(b);
  if (transfer.staged) free_events_.push_back(transfer.staged);
  transfer = Transfer{};
}

void GlooCudaStaging::join(StreamHandle stream) {
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaEventRecord(as_event(ordered_), as_stream(stream_)));
  SUBLET_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream), as_event(ordered_), 0));
}

void GlooCudaStaging::host_wait(StreamHandle stream) {
  memory::CudaDeviceGuard guard(device_);
  SUBLET_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
}

}  // namespace sublet::distributed
#else
namespace sublet::distributed {

GlooCudaStaging::GlooCudaStaging(Device device) : device_(device) {
  throw DeviceError("--backend gloo --device " + device.str() + ": this sublet was built without CUDA");
}
GlooCudaStaging::~GlooCudaStaging() = default;
GlooCudaStaging::Transfer GlooCudaStaging::stage_out(void*, std::size_t, StreamHandle) { return {}; }
bool GlooCudaStaging::wait_staged(const Transfer&, std::chrono::steady_clock::time_point) const { return false; }
void GlooCudaStaging::stage_in(Transfer&) {}
void GlooCudaStaging::discard(Transfer&) {}
void GlooCudaStaging::join(StreamHandle) {}
void GlooCudaStaging::host_wait(StreamHandle) {}

}  // namespace sublet::distributed
#endif
