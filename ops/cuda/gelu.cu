// GELU forward and backward as grid-stride element-wise kernels.
#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/gelu_cuda.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"
#include "ops/gelu_math.h"

namespace sublet::ops::cuda {
namespace {

template <typename T>
__global__ void forward_kernel(std::int64_t numel, GeluApproximate approximate, const T* x, T* y) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    y[i] = store_compute<T>(gelu_math::value(load_compute(x[i]), approximate));
  }
}

template <typename T>
__global__ void backward_kernel(std::int64_t numel, GeluApproximate approximate, const T* grad, const T* x,
                                T* grad_input) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    grad_input[i] = store_compute<T>(load_compute(grad[i]) * gelu_math::derivative(load_compute(x[i]), approximate));
  }
}

}  // namespace

void gelu_forward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate, const void* input,
                  void* output) {
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_floating(dtype, "gelu", [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        numel, approximate, static_cast<const T*>(input), static_cast<T*>(output));
    SUBLET_CUDA_LAUNCH_CHECK(gelu_forward_kernel);
  });
}

void gelu_backward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                   const void* grad_output, const void* input, void* grad_input) {
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_floating(dtype, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        numel, approximate, static_cast<const T*>(grad_output), static_cast<const T*>(input),
        static_cast<T*>(grad_input));
    SUBLET_CUDA_LAUNCH_CHECK(gelu_backward_kernel);
  });
}

}  // namespace sublet::ops::cuda
