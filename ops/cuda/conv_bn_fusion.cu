// The element-wise and per-channel kernels of the convolution + batch norm fusion: the prologue
// alone (relu(x * scale + bias)), the per-channel sums of an activation and the batch norm
// statistics from them. The fused cuDNN plan does the first two inside the convolution; these
// serve the composition (no engine, or asked for) and the backward's recomputation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "memory/cuda_check.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/conv_bn_fusion_cuda.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/launch.cuh"

namespace sublet::ops::cuda {

namespace {

template <typename T>
__global__ void scale_bias_relu_kernel(const T* __restrict__ x, const float* __restrict__ scale,
                                       const float* __restrict__ bias, T* __restrict__ out, std::int64_t n,
                                       std::int64_t channels, std::int64_t spatial, bool channels_last) {
  for (std::int64_t i = global_thread_index(); i < n; i += grid_threads()) {
    const std::int64_t c = channels_last ? i % channels : (i / spatial) % channels;
    using C = ComputeType<T>;
    const C v = load_compute(x[i]) * static_cast<C>(scale[c]) + static_cast<C>(bias[c]);
    out[i] = store_compute<T>(v > C(0) ? v : C(0));
  }
}

// Channels-last: a block of 32 x 8 threads covers 32 channels; its rows stride over the grid's
// y dimension; one atomic add per channel and block.
template <typename T>
__global__ void channel_sums_nhwc_kernel(const T* __restrict__ x, float* sum, float* sqsum, std::int64_t rows,
                                         std::int64_t channels) {
  __shared__ float partial[2][8][33];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.0f, q = 0.0f;
  if (c < channels) {
    for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * 8 + threadIdx.y; r < rows;
         r += static_cast<std::int64_t>(gridDim.y) * 8) {
      const float v = static_cast<float>(load_compute(x[r * channels + c]));
      s += v;
      q += v * v;
    }
  }
  partial[0][threadIdx.y][threadIdx.x] = s;
  partial[1][threadIdx.y][threadIdx.x] = q;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    for (int k = 1; k < 8; ++k) {
      s += partial[0][k][threadIdx.x];
      q += partial[1][k][threadIdx.x];
    }
    atomicAdd(sum + c, s);
    atomicAdd(sqsum + c, q);
  }
}

// NCHW: one block per (n, c) plane.
template <typename T>
__global__ void channel_sums_nchw_kernel(const T* __restrict__ x, float* sum, float* sqsum, std::int64_t channels,
                                         std::int64_t spatial) {
  __shared__ float partial[2][kBlockThreads];
  const std::int64_t plane = blockIdx.x;
  const T* p = x + plane * spatial;
  float s = 0.0f, q = 0.0f;
  for (std::int64_t i = threadIdx.x; i < spatial; i += blockDim.x) {
    const float v = static_cast<float>(load_compute(p[i]));
    s += v;
    q += v * v;
  }
  partial[0][threadIdx.x] = s;
  partial[1][threadIdx.x] = q;
  __syncthreads();
  for (int step = kBlockThreads / 2; step > 0; step /= 2) {
    if (static_cast<int>(threadIdx.x) < step) {
      partial[0][threadIdx.x] += partial[0][threadIdx.x + step];
      partial[1][threadIdx.x] += partial[1][threadIdx.x + step];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(sum + plane % channels, partial[0][0]);
    atomicAdd(sqsum + plane % channels, partial[1][0]);
  }
}

__global__ void stats_from_sums_kernel(std::int64_t channels, double count, const float* sum, const float* sqsum,
                                       const float* weight, const float* bias, float* running_mean,
                                       float* running_var, double momentum, double eps, float* save_mean,
                                       float* save_invstd, float* scale, float* shift,
                                       long long* num_batches_tracked) {
  const std::int64_t c = global_thread_index();
  if (c == 0 && num_batches_tracked != nullptr) *num_batches_tracked += 1;
  if (c >= channels) return;
  const double mean = sum[c] / count;
  const double var = fmax(sqsum[c] / count - mean * mean, 0.0);
  const double invstd = 1.0 / sqrt(var + eps);
  const double w = weight != nullptr ? weight[c] : 1.0, b = bias != nullptr ? bias[c] : 0.0;
  save_mean[c] = static_cast<float>(mean);
  save_invstd[c] = static_cast<float>(invstd);
  scale[c] = static_cast<float>(w * invstd);
  shift[c] = static_cast<float>(b - mean * w * invstd);
  if (running_mean != nullptr) {
    running_mean[c] = static_cast<float>((1.0 - momentum) * running_mean[c] + momentum * mean);
    running_var[c] = static_cast<float>((1.0 - momentum) * running_var[c] + momentum * var * count / (count - 1.0));
  }
}

template <typename F>
void with_type(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    case DType::BFloat16: f(__nv_bfloat16{}); return;
    case DType::Float16: f(__half{}); return;
    default: break;
  }
  throw DTypeError(std::string(op) + " (cuda): expected float32, float64, bfloat16 or float16, got " +
                   dtype_name(dtype));
}

}  // namespace

void scale_bias_relu(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input, const float* scale,
                     const float* bias, void* output) {
  memory::CudaDeviceGuard device(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  with_type(dtype, "scale_bias_relu", [&](auto tag) {
    using T = decltype(tag);
    scale_bias_relu_kernel<T><<<grid_for(s.numel()), kBlockThreads, 0, stream>>>(
        static_cast<const T*>(input), scale, bias, static_cast<T*>(output), s.numel(), s.channels, s.spatial(),
        s.format == MemoryFormat::ChannelsLast);
    SUBLET_CUDA_LAUNCH_CHECK(scale_bias_relu_kernel);
  });
}

void channel_sums(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input, float* sum,
                  float* sqsum) {
  memory::CudaDeviceGuard device(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  const std::size_t bytes = static_cast<std::size_t>(s.channels) * sizeof(float);
  SUBLET_CUDA_CHECK(cudaMemsetAsync(sum, 0, bytes, stream));
  SUBLET_CUDA_CHECK(cudaMemsetAsync(sqsum, 0, bytes, stream));
  with_type(dtype, "channel_sums", [&](auto tag) {
    using T = decltype(tag);
    if (s.format == MemoryFormat::ChannelsLast) {
      const std::int64_t rows = s.batch * s.spatial();
      const dim3 grid(static_cast<unsigned>((s.channels + 31) / 32),
                      static_cast<unsigned>(std::min<std::int64_t>((rows + 63) / 64, 1024)));
      channel_sums_nhwc_kernel<T><<<grid, dim3(32, 8), 0, stream>>>(static_cast<const T*>(input), sum, sqsum, rows,
                                                                    s.channels);
      SUBLET_CUDA_LAUNCH_CHECK(channel_sums_nhwc_kernel);
    } else {
      channel_sums_nchw_kernel<T><<<static_cast<unsigned>(s.batch * s.channels), kBlockThreads, 0, stream>>>(
          static_cast<const T*>(input), sum, sqsum, s.channels, s.spatial());
      SUBLET_CUDA_LAUNCH_CHECK(channel_sums_nchw_kernel);
    }
  });
}

void batch_norm_stats_from_sums(const Context& ctx, std::int64_t channels, std::int64_t count, const float* sum,
                                const float* sqsum, const float* weight, const float* bias, float* running_mean,
                                float* running_var, double momentum, double eps, float* save_mean, float* save_invstd,
                                float* scale, float* shift, std::int64_t* num_batches_tracked) {
  memory::CudaDeviceGuard device(ctx.device);
  const auto stream = static_cast<cudaStream_t>(ctx.stream);
  stats_from_sums_kernel<<<grid_for(channels), kBlockThreads, 0, stream>>>(
      channels, static_cast<double>(count), sum, sqsum, weight, bias, running_mean, running_var, momentum, eps,
      save_mean, save_invstd, scale, shift, reinterpret_cast<long long*>(num_batches_tracked));
  SUBLET_CUDA_LAUNCH_CHECK(stats_from_sums_kernel);
}

}  // namespace sublet::ops::cuda
