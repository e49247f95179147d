#pragma once
// The kernels' view of a stream: ops::Context carries the driver-neutral StreamHandle
// (core/device.h); launches and library calls want the cudaStream_t it is.
#include <cuda_runtime_api.h>

#include "core/device.h"

namespace sublet::ops::cuda {

inline cudaStream_t stream_of(StreamHandle stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace sublet::ops::cuda
