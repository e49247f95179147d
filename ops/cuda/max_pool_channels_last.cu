// Channels-last max pooling, 16 bytes of channels per thread (max_pool_channels_last.h): grid-stride
// loops over the work items of max_pool_channels_last.cuh, and their launches.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/max_pool_channels_last.h"
#include "ops/cuda/max_pool_channels_last.cuh"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

__device__ inline unsigned first_index32() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline unsigned grid_threads32() { return gridDim.x * blockDim.x; }

template <typename T, typename Code>
__global__ void max_pool_forward_vec(const __grid_constant__ MaxPoolVectorGeometry g, const T* __restrict__ input,
                                     T* __restrict__ output, Code* __restrict__ codes) {
  for (unsigned t = first_index32(); t < g.output_work; t += grid_threads32()) {
    max_pool_forward_item(g, input, output, codes, t);
  }
}

template <typename T, typename Code>
__global__ void max_pool_backward_vec(const __grid_constant__ MaxPoolVectorGeometry g,
                                      const T* __restrict__ grad_output, const Code* __restrict__ codes,
                                      T* __restrict__ grad_input) {
  for (unsigned t = first_index32(); t < g.input_work; t += grid_threads32()) {
    max_pool_backward_item(g, grad_output, codes, grad_input, t);
  }
}

bool aligned(const void* p, std::size_t alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

// f(T{}) for the vectorised dtypes.
template <typename F>
void dispatch_vectorized(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); return;
    case DType::BFloat16: f(__nv_bfloat16{}); return;
    case DType::Float16: f(__half{}); return;
    default:
      throw DTypeError(std::string("max_pool2d (channels-last vectorised): takes float32, bfloat16 or float16, got ") +
                       dtype_name(dtype));
  }
}

}  // namespace

bool max_pool_vectorized_fits(const Pool2dShape& shape, DType dtype, const void* activation_a,
                              const void* activation_b, const void* codes, std::size_t code_bytes) {
  if (shape.format != MemoryFormat::ChannelsLast) return false;
  if (dtype != DType::Float32 && dtype != DType::BFloat16 && dtype != DType::Float16) return false;
  const std::int64_t lanes = static_cast<std::int64_t>(kMaxPoolVectorBytes / element_size(dtype));
  const std::size_t code_share = std::min(kMaxPoolVectorBytes, code_bytes * static_cast<std::size_t>(lanes));
  return shape.channels % lanes == 0 && shape.input_numel() < kIntDividerLimit &&
         shape.output_numel() < kIntDividerLimit && aligned(activation_a, kMaxPoolVectorBytes) &&
         aligned(activation_b, kMaxPoolVectorBytes) && aligned(codes, code_share);
}

template <typename Code>
void max_pool_forward_vectorized(const Context& ctx, const Pool2dShape& shape, DType dtype, const void* input,
                                 void* output, Code* codes) {
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_vectorized(dtype, [&](auto tag) {
    using T = decltype(tag);
    const MaxPoolVectorGeometry g = max_pool_vector_geometry(shape, kMaxPoolLanes<T>);
    max_pool_forward_vec<T, Code><<<grid_for(g.output_work), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        g, static_cast<const T*>(input), static_cast<T*>(output), codes);
    SUBLET_CUDA_LAUNCH_CHECK(max_pool_forward_vec);
  });
}

template <typename Code>
void max_pool_backward_vectorized(const Context& ctx, const Pool2dShape& shape, DType dtype,
                                  const void* grad_output, const Code* codes, void* grad_input) {
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_vectorized(dtype, [&](auto tag) {
    using T = decltype(tag);
    const MaxPoolVectorGeometry g = max_pool_vector_geometry(shape, kMaxPoolLanes<T>);
    max_pool_backward_vec<T, Code><<<grid_for(g.input_work), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        g, static_cast<const T*>(grad_output), codes, static_cast<T*>(grad_input));
    SUBLET_CUDA_LAUNCH_CHECK(max_pool_backward_vec);
  });
}

template void max_pool_forward_vectorized<std::int64_t>(const Context&, const Pool2dShape&, DType, const void*, void*,
                                                        std::int64_t*);
template void max_pool_forward_vectorized<std::uint8_t>(const Context&, const Pool2dShape&, DType, const void*, void*,
                                                        std::uint8_t*);
template void max_pool_backward_vectorized<std::int64_t>(const Context&, const Pool2dShape&, DType, const void*,
                                                         const std::int64_t*, void*);
template void max_pool_backward_vectorized<std::uint8_t>(const Context&, const Pool2dShape&, DType, const void*,
                                                         const std::uint8_t*, void*);

}  // namespace sublet::ops::cuda
