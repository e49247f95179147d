#include "runtime/distributed/communication_stream.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"

namespace sublet::distributed {

StreamHandle communication_stream(Device device) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> streams;
  std::lock_guard lock(mutex);
  cudaStream_t& stream = streams[device.index];
  if (!stream) {
    memory::CudaDeviceGuard guard(device);
    SUBLET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return stream;
}

}  // namespace sublet::distributed
