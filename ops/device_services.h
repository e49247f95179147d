#pragma once
// What a device backend provides besides kernels: byte copies across the host/device boundary,
// the stream-capture query, the external profiler's range, stream-ordered uploads of host
// scalars. One struct of function pointers per DeviceType, filled by the backend's
// registration (ops/cuda/register_cuda_kernels.cpp); an empty entry means the backend does not
// provide it (not built, or not meaningful there, as capture on the CPU). No CUDA header here:
// the front files that use it (ops/copy.cpp, ops/stream_capture.cpp, ...) compile without CUDA.
#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "ops/context.h"

namespace sublet::ops {

struct DeviceServices {
  // Contiguous bytes between two devices, at least one of them of this type; returns once the
  // bytes may be read at dst and src may be reused (as cudaMemcpy).
  void (*copy_bytes)(Device dst_device, void* dst, Device src_device, const void* src, std::size_t bytes,
                     StreamHandle stream) = nullptr;
  // Whether ctx.stream is recording a graph instead of running.
  bool (*stream_is_capturing)(const Context& ctx) = nullptr;
  // An external profiler's recording range (cudaProfilerStart/Stop).
  void (*profiler_start)() = nullptr;
  void (*profiler_stop)() = nullptr;
  // A second stream of ctx.device (one per lane, ops/concurrent.h's SideLane) that first waits
  // for the work enqueued on ctx.stream so far (fork), and making ctx.stream wait for everything
  // enqueued on the lane's stream (join): ops/concurrent.h.
  StreamHandle (*fork_stream)(const Context& ctx, int lane) = nullptr;
  void (*join_stream)(const Context& ctx, int lane) = nullptr;
  // Stream-ordered copy of host doubles to device memory (ops/optim_update.h).
  void (*write_update_scalars)(const Context& ctx, double* device_values, const double* host_values,
                               std::int64_t count) = nullptr;
};

// For registration: the services of one device type, to fill in before the first lookup.
DeviceServices& mutable_device_services(DeviceType type);
// For callers: the services of a device type, after registration (ensure_kernels_registered).
const DeviceServices& device_services(DeviceType type);

}  // namespace sublet::ops
