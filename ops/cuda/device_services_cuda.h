#pragma once
// CUDA implementations of device services (ops/device_services.h); registered by
// ops/cuda/register_cuda_kernels.cpp.
#include "ops/context.h"

namespace sublet::ops::cuda {

bool stream_is_capturing(const Context& ctx);
StreamHandle fork_stream(const Context& ctx, int lane);
void join_stream(const Context& ctx, int lane);
void profiler_start();
void profiler_stop();

}  // namespace sublet::ops::cuda
