// conv2d bias add and bias gradient for 16-bit dtypes and channels-last (ops/cuda/conv2d_bias.h).
#include "ops/cuda/conv2d_bias.h"

#include <algorithm>
#include <cstdint>

#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"
#include "memory/cuda_device_guard.h"

namespace sublet::ops::cuda {
namespace {

// plane = H*W for NCHW (channel = (i / plane) % C); plane = 1 for NHWC (channel = i % C).
template <typename T>
__global__ void bias_add_kernel(T* output, const T* bias, std::int64_t total, std::int64_t channels,
                                std::int64_t plane) {
  for (std::int64_t i = global_thread_index(); i < total; i += grid_threads()) {
    const std::int64_t c = (i / plane) % channels;
    output[i] = store_compute<T>(load_compute(output[i]) + load_compute(bias[c]));
  }
}

constexpr int kReduceThreads = 256;  // NCHW: one block of a channel's chunk
constexpr int kColumns = 32;         // NHWC: channels per block (a warp reads 32 adjacent channels)
constexpr int kRows = 8;             // NHWC: rows per block step

// NCHW: block (c, chunk) sums the chunk's share of channel c's batch*plane values.
template <typename T, typename Acc>
__global__ void bias_grad_nchw_kernel(const T* grad_output, Acc* partial, std::int64_t batch, std::int64_t channels,
                                      std::int64_t plane) {
  __shared__ Acc scratch[kReduceThreads];
  const std::int64_t c = blockIdx.x;
  const std::int64_t count = batch * plane;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * kReduceThreads;
  Acc sum = 0;
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.y) * kReduceThreads + threadIdx.x; j < count; j += step) {
    const std::int64_t n = j / plane, p = j - n * plane;
    sum += static_cast<Acc>(load_compute(grad_output[(n * channels + c) * plane + p]));
  }
  sum = block_combine(sum, scratch, [](Acc a, Acc b) { return a + b; });
  if (threadIdx.x == 0) partial[static_cast<std::int64_t>(blockIdx.y) * channels + c] = sum;
}

// NHWC: grad_output is [rows = N*H*W, C]; block (column group, chunk) with kColumns x kRows
// threads sums its rows of kColumns adjacent channels.
template <typename T, typename Acc>
__global__ void bias_grad_nhwc_kernel(const T* grad_output, Acc* partial, std::int64_t rows, std::int64_t channels) {
  __shared__ Acc scratch[kRows][kColumns + 1];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumns + threadIdx.x;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * kRows;
  Acc sum = 0;
  if (c < channels) {
    for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * kRows + threadIdx.y; r < rows; r += step) {
      sum += static_cast<Acc>(load_compute(grad_output[r * channels + c]));
    }
  }
  scratch[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    Acc total = 0;
    for (int y = 0; y < kRows; ++y) total += scratch[y][threadIdx.x];
    partial[static_cast<std::int64_t>(blockIdx.y) * channels + c] = total;
  }
}

// grad_bias[c] = the chunks' partial sums of channel c, added in chunk order.
template <typename T, typename Acc>
__global__ void bias_grad_finish_kernel(const Acc* partial, T* grad_bias, std::int64_t chunks, std::int64_t channels) {
  for (std::int64_t c = global_thread_index(); c < channels; c += grid_threads()) {
    Acc sum = 0;
    for (std::int64_t k = 0; k < chunks; ++k) sum += partial[k * channels + c];
    grad_bias[c] = store_compute<T>(static_cast<ComputeType<T>>(sum));
  }
}

// Chunks per channel: about 16 values per thread, at most 1024 chunks (the partial buffer stays
// small) and at most 65535 (gridDim.y).
std::int64_t chunks_for(std::int64_t per_channel, std::int64_t per_chunk_step) {
  return std::clamp<std::int64_t>((per_channel + per_chunk_step * 16 - 1) / (per_chunk_step * 16), 1, 1024);
}

}  // namespace

void conv2d_bias_add(const Context& ctx, const Conv2dShape& s, DType dtype, const void* bias, void* output) {
  memory::CudaDeviceGuard device(ctx.device);
  const std::int64_t total = s.output_numel();
  if (total == 0) return;
  const std::int64_t plane = s.format == MemoryFormat::ChannelsLast ? 1 : s.out_height() * s.out_width();
  dispatch_device_floating(dtype, "conv2d bias", [&](auto tag) {
    using T = decltype(tag);
    bias_add_kernel<T><<<grid_for(total), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<T*>(output), static_cast<const T*>(bias), total, s.out_channels, plane);
    SUBLET_CUDA_LAUNCH_CHECK(bias_add_kernel);
  });
}

void conv2d_bias_grad(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                      void* grad_bias) {
  memory::CudaDeviceGuard device(ctx.device);
  const std::int64_t channels = s.out_channels;
  const std::int64_t plane = s.out_height() * s.out_width();
  const std::int64_t per_channel = s.batch * plane;
  const bool channels_last = s.format == MemoryFormat::ChannelsLast;
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_floating(dtype, "conv2d bias gradient", [&](auto tag) {
    using T = decltype(tag);
    using Acc = ComputeType<T>;  // float32 for the 16-bit types
    const std::int64_t chunks = chunks_for(per_channel, channels_last ? kRows : kReduceThreads);
    memory::ScopedBlock partial = ctx.workspace(static_cast<std::size_t>(chunks * channels) * sizeof(Acc));
    Acc* partial_sums = static_cast<Acc*>(partial.get());
    if (channels_last) {
      const dim3 grid(static_cast<unsigned>((channels + kColumns - 1) / kColumns), static_cast<unsigned>(chunks));
      bias_grad_nhwc_kernel<T, Acc><<<grid, dim3(kColumns, kRows), 0, stream>>>(static_cast<const T*>(grad_output),
                                                                                 partial_sums, per_channel, channels);
      SUBLET_CUDA_LAUNCH_CHECK(bias_grad_nhwc_kernel);
    } else {
      const dim3 grid(static_cast<unsigned>(channels), static_cast<unsigned>(chunks));
      bias_grad_nchw_kernel<T, Acc><<<grid, kReduceThreads, 0, stream>>>(static_cast<const T*>(grad_output),
                                                                         partial_sums, s.batch, channels, plane);
      SUBLET_CUDA_LAUNCH_CHECK(bias_grad_nchw_kernel);
    }
    bias_grad_finish_kernel<T, Acc><<<grid_for(channels), kBlockThreads, 0, stream>>>(
        partial_sums, static_cast<T*>(grad_bias), chunks, channels);
    SUBLET_CUDA_LAUNCH_CHECK(bias_grad_finish_kernel);
  });
}

}  // namespace sublet::ops::cuda
