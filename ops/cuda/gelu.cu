// GELU forward and backward as grid-stride element-wise kernels. When every pointer is 16-byte
// aligned a thread moves 16 bytes per operand (8 bfloat16 or float16, 4 float32, 2 float64) with
// one vector access, and the numel % V elements after the last whole vector go one per thread;
// otherwise (a view with an offset) every element is its own access.
#include <cstdint>

#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/gelu_cuda.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector_pack.cuh"
#include "ops/gelu_math.h"

namespace sublet::ops::cuda {
namespace {

template <typename T, int V>
__global__ void __launch_bounds__(kBlockThreads)
    forward_kernel(std::int64_t numel, GeluApproximate approximate, const T* x, T* y) {
  const std::int64_t packs = numel / V;
  for (std::int64_t p = global_thread_index(); p < packs; p += grid_threads()) {
    const Pack<T, V> in = load_pack<T, V>(x, p * V);
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = store_compute<T>(gelu_math::value(load_compute(in.v[j]), approximate));
    store_pack<T, V>(y, p * V, out);
  }
  const std::int64_t i = packs * V + global_thread_index();
  if (i < numel) y[i] = store_compute<T>(gelu_math::value(load_compute(x[i]), approximate));
}

template <typename T, int V>
__global__ void __launch_bounds__(kBlockThreads)
    backward_kernel(std::int64_t numel, GeluApproximate approximate, const T* grad, const T* x, T* grad_input) {
  const std::int64_t packs = numel / V;
  for (std::int64_t p = global_thread_index(); p < packs; p += grid_threads()) {
    const Pack<T, V> g = load_pack<T, V>(grad, p * V), in = load_pack<T, V>(x, p * V);
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      out.v[j] = store_compute<T>(load_compute(g.v[j]) * gelu_math::derivative(load_compute(in.v[j]), approximate));
    }
    store_pack<T, V>(grad_input, p * V, out);
  }
  const std::int64_t i = packs * V + global_thread_index();
  if (i < numel) {
    grad_input[i] = store_compute<T>(load_compute(grad[i]) * gelu_math::derivative(load_compute(x[i]), approximate));
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <typename T>
constexpr int kWidth = static_cast<int>(16 / sizeof(T));

// Threads for one vector each (the grid-stride loop covers the rest); at least one block, whose
// first threads also take the tail.
unsigned grid_for_vectors(std::int64_t numel, int width) { return grid_for(std::max<std::int64_t>(numel / width, 1)); }

}  // namespace

void gelu_forward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate, const void* input,
                  void* output) {
  if (numel == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_floating(dtype, "gelu", [&](auto tag) {
    using T = decltype(tag);
    const auto* x = static_cast<const T*>(input);
    auto* y = static_cast<T*>(output);
    if (aligned16(x) && aligned16(y)) {
      forward_kernel<T, kWidth<T>><<<grid_for_vectors(numel, kWidth<T>), kBlockThreads, 0, stream>>>(numel, approximate,
                                                                                                     x, y);
    } else {
      forward_kernel<T, 1><<<grid_for(numel), kBlockThreads, 0, stream>>>(numel, approximate, x, y);
    }
    SUBLET_CUDA_LAUNCH_CHECK(gelu_forward_kernel);
  });
}

void gelu_backward(const Context& ctx, DType dtype, std::int64_t numel, GeluApproximate approximate,
                   const void* grad_output, const void* input, void* grad_input) {
  if (numel == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_floating(dtype, "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    const auto* g = static_cast<const T*>(grad_output);
    const auto* x = static_cast<const T*>(input);
    auto* gi = static_cast<T*>(grad_input);
    if (aligned16(g) && aligned16(x) && aligned16(gi)) {
      backward_kernel<T, kWidth<T>><<<grid_for_vectors(numel, kWidth<T>), kBlockThreads, 0, stream>>>(
          numel, approximate, g, x, gi);
    } else {
      backward_kernel<T, 1><<<grid_for(numel), kBlockThreads, 0, stream>>>(numel, approximate, g, x, gi);
    }
    SUBLET_CUDA_LAUNCH_CHECK(gelu_backward_kernel);
  });
}

}  // namespace sublet::ops::cuda
