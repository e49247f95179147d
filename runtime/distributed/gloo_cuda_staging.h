#pragma once
// Gloo moves host memory only; for CUDA tensors (`--backend gloo --device cuda`) a collective's
// bytes go through pinned host buffers, copied on the group's communication stream as PyTorch's
// Gloo backend does: device to host after the work the caller's stream has enqueued so far,
// the host collective once that copy is done, host to device on the same stream after it.
// Stream order keeps the buffers safe to reuse: the next copy into a buffer is enqueued behind
// the copy that read it. CUDA builds only (the constructor throws DeviceError elsewhere).
#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "core/device.h"

namespace sublet::distributed {

class GlooCudaStaging {
 public:
  struct Transfer {
    void* device_data = nullptr;
    void* host = nullptr;      // pinned, at least `bytes`
    std::size_t bytes = 0;
    void* staged = nullptr;    // cudaEvent_t: the device-to-host copy is done
  };

  explicit GlooCudaStaging(Device device);
  ~GlooCudaStaging();
  GlooCudaStaging(const GlooCudaStaging&) = delete;
  GlooCudaStaging& operator=(const GlooCudaStaging&) = delete;

  StreamHandle stream() const { return stream_; }
  // Enqueues the copy of `bytes` at `device_data` into a pinned buffer on the communication
  // stream, behind the work enqueued on `after` so far.
  Transfer stage_out(void* device_data, std::size_t bytes, StreamHandle after);
  // The host waits for the copy of stage_out (polling, so that a deadline holds); false when
  // the deadline passed first. Callable from any thread.
  bool wait_staged(const Transfer& transfer, std::chrono::steady_clock::time_point deadline) const;
  // Enqueues the copy back to the device on the communication stream and gives the buffer back.
  void stage_in(Transfer& transfer);
  // Gives the buffer back without copying (a failed collective).
  void discard(Transfer& transfer);
  // `stream` waits for everything enqueued on the communication stream so far.
  void join(StreamHandle stream);
  // The host waits for the work enqueued on `stream` so far.
  void host_wait(StreamHandle stream);

 private:
  struct Buffer {
    void* host = nullptr;
    std::size_t bytes = 0;
  };
  Device device_;
  StreamHandle stream_ = nullptr;
  [[maybe_unused]] void* ordered_ = nullptr;  // cudaEvent_t for stream-to-stream waits (CUDA builds)
  std::vector<Buffer> free_;
  std::vector<Buffer> all_;
  std::vector<void*> free_events_;
};

}  // namespace sublet::distributed
