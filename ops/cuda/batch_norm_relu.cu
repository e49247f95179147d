// Training-mode batch norm fused with the ReLU (and the residual add) that follows it in a
// ResNet: one kernel forward, one backward, one block per channel. See ops/batch_norm_relu.h.
//
// Why own kernels: at ResNet-18's 32x32 sizes most channels hold 128-2048 values, and cuDNN's
// batch norm, the add and the ReLU are each a launch of a few microseconds that mostly waits on its
// own latency; fused, a basic block's tail is one launch each way instead of two or three.
//
// Each block reads its channel once into registers; the statistics are accumulated in double and
// combined in a fixed order (warp shuffles, then across warps), so repeated runs give identical
// bits. The variance is two-pass over the registers (sum of centred squares), as the CPU kernel.
// Value i of a channel is at sample i / spatial, position i % spatial: an IntDivider makes that a
// multiply-high (a 64-bit division per value would cost more than the rest of the kernel).
#include "ops/cuda/batch_norm_relu_cuda.h"

#include <string>
#include <type_traits>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/int_divider.h"

namespace sublet::ops::cuda {
namespace {

constexpr int kThreads = 512;  // a multiple of 32, at most 32 warps (block_sums)
constexpr int kWarps = kThreads / 32;

// Where value i (0 <= i < batch * spatial <= kFusedBatchNormMaxPerChannel) of channel c lives in
// an NCHW tensor.
struct ChannelIndexer {
  std::int64_t channels;
  IntDivider spatial;
  __device__ std::int64_t operator()(std::int64_t c, std::int64_t i) const {
    std::uint32_t sample = 0, position = 0;
    spatial.divmod(static_cast<std::uint32_t>(i), sample, position);
    return (static_cast<std::int64_t>(sample) * channels + c) * spatial.divisor() + position;
  }
};

struct Sums {
  double a = 0, b = 0;
};

// The block's totals of two per-thread sums, in a fixed order; every thread gets them.
__device__ Sums block_sums(Sums value) {
  __shared__ Sums per_warp[kWarps];
  for (int offset = 16; offset > 0; offset /= 2) {
    value.a += __shfl_down_sync(0xffffffffu, value.a, offset);
    value.b += __shfl_down_sync(0xffffffffu, value.b, offset);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) per_warp[warp] = value;
  __syncthreads();
  Sums total;
  for (int w = 0; w < kWarps; ++w) {
    total.a += per_warp[w].a;
    total.b += per_warp[w].b;
  }
  __syncthreads();  // per_warp may be written again by the next call
  return total;
}

// Thread t holds values t, t + kThreads, ... of its block's channel in registers (kPerThread of
// them, kThreads * kPerThread >= the channel's count), so the channel is read from memory once.
template <typename T, int kPerThread>
__global__ void __launch_bounds__(kThreads) forward_kernel(std::int64_t batch, ChannelIndexer at, const T* input,
                                                           const T* residual, const T* weight, const T* bias,
                                                           T* running_mean, T* running_var, double momentum,
                                                           double eps, T* output, T* save_mean, T* save_invstd) {
  const std::int64_t c = blockIdx.x;
  const std::int64_t count = batch * at.spatial.divisor();
  auto index = [&](int j) { return static_cast<std::int64_t>(threadIdx.x) + static_cast<std::int64_t>(j) * kThreads; };

  T x[kPerThread];
  Sums sum;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (index(j) < count) {
      x[j] = input[at(c, index(j))];
      sum.a += static_cast<double>(x[j]);
    }
  }
  const double mean = block_sums(sum).a / static_cast<double>(count);
  Sums centred;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (index(j) < count) {
      const double d = static_cast<double>(x[j]) - mean;
      centred.a += d * d;
    }
  }
  const double var = block_sums(centred).a / static_cast<double>(count);
  const double invstd = 1.0 / sqrt(var + eps);
  if (threadIdx.x == 0) {
    save_mean[c] = static_cast<T>(mean);
    save_invstd[c] = static_cast<T>(invstd);
    const double unbiased = var * static_cast<double>(count) / static_cast<double>(count - 1);
    if (running_mean != nullptr) running_mean[c] = static_cast<T>((1 - momentum) * running_mean[c] + momentum * mean);
    if (running_var != nullptr) running_var[c] = static_cast<T>((1 - momentum) * running_var[c] + momentum * unbiased);
  }
  const T scale = static_cast<T>(invstd * (weight != nullptr ? static_cast<double>(weight[c]) : 1.0));
  const T shift = static_cast<T>((bias != nullptr ? static_cast<double>(bias[c]) : 0.0) - mean * static_cast<double>(scale));
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (index(j) < count) {
      const std::int64_t offset = at(c, index(j));
      T y = x[j] * scale + shift;
      if (residual != nullptr) y += residual[offset];
      output[offset] = y > T(0) ? y : T(0);  // as UnaryOp::Relu
    }
  }
}

template <typename T, int kPerThread>
__global__ void __launch_bounds__(kThreads) backward_kernel(std::int64_t batch, ChannelIndexer at,
                                                            const T* grad_output, const T* output, const T* input,
                                                            const T* weight, const T* save_mean,
                                                            const T* save_invstd, T* grad_input, T* grad_weight,
                                                            T* grad_bias, T* grad_residual) {
  const std::int64_t c = blockIdx.x;
  const std::int64_t count = batch * at.spatial.divisor();
  const double mean = save_mean[c], invstd = save_invstd[c];
  auto index = [&](int j) { return static_cast<std::int64_t>(threadIdx.x) + static_cast<std::int64_t>(j) * kThreads; };

  // g: the ReLU's gradient (as BinaryOp::ReluBackward: where its output > 0), which batch norm
  // and the residual receive.
  T g[kPerThread], x[kPerThread];
  Sums partial;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (index(j) < count) {
      const std::int64_t offset = at(c, index(j));
      g[j] = output[offset] > T(0) ? grad_output[offset] : T(0);
      x[j] = input[offset];
      partial.a += static_cast<double>(g[j]);
      partial.b += static_cast<double>(g[j]) * (static_cast<double>(x[j]) - mean);
    }
  }
  const Sums sums = block_sums(partial);
  const double grad_sum = sums.a, grad_centred_sum = sums.b;
  if (threadIdx.x == 0) {
    if (grad_weight != nullptr) grad_weight[c] = static_cast<T>(grad_centred_sum * invstd);
    if (grad_bias != nullptr) grad_bias[c] = static_cast<T>(grad_sum);
  }
  if (grad_input == nullptr && grad_residual == nullptr) return;
  // d input = w * invstd * (g - mean(g) - xhat * mean(g * xhat)), xhat = (x - mean) * invstd.
  const double n = static_cast<double>(count);
  const double scale = invstd * (weight != nullptr ? static_cast<double>(weight[c]) : 1.0);
  const double grad_mean = grad_sum / n;
  const double xhat_factor = grad_centred_sum * invstd * invstd / n;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (index(j) < count) {
      const std::int64_t offset = at(c, index(j));
      if (grad_residual != nullptr) grad_residual[offset] = g[j];
      if (grad_input != nullptr) {
        const double centred = static_cast<double>(x[j]) - mean;
        grad_input[offset] = static_cast<T>(scale * (static_cast<double>(g[j]) - grad_mean - centred * xhat_factor));
      }
    }
  }
}

// Calls launch(std::integral_constant<int, K>) with the least K in {1, 2, 4} for which
// kThreads * K values cover a channel (kThreads * 4 = kFusedBatchNormMaxPerChannel).
template <typename Launch>
void with_values_per_thread(std::int64_t count, Launch&& launch) {
  static_assert(kThreads * 4 == kFusedBatchNormMaxPerChannel);
  if (count <= kThreads) return launch(std::integral_constant<int, 1>{});
  if (count <= 2 * kThreads) return launch(std::integral_constant<int, 2>{});
  return launch(std::integral_constant<int, 4>{});
}

template <typename Run>
void by_dtype(DType dtype, Run&& run) {
  if (dtype == DType::Float32) {
    run(float{});
  } else if (dtype == DType::Float64) {
    run(double{});
  } else {
    throw DTypeError(std::string("batch_norm_relu: expected float32 or float64, got ") + dtype_name(dtype));
  }
}

}  // namespace

void batch_norm_relu_forward_training(const Context& ctx, const BatchNormShape& s, DType dtype, const void* input,
                                      const void* residual, const void* weight, const void* bias, void* running_mean,
                                      void* running_var, double momentum, double eps, void* output, void* save_mean,
                                      void* save_invstd) {
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    with_values_per_thread(s.batch * s.spatial(), [&](auto per_thread) {
      forward_kernel<T, decltype(per_thread)::value><<<static_cast<unsigned>(s.channels), kThreads, 0, stream>>>(
          s.batch, ChannelIndexer{s.channels, IntDivider(s.spatial())}, static_cast<const T*>(input),
          static_cast<const T*>(residual), static_cast<const T*>(weight), static_cast<const T*>(bias),
          static_cast<T*>(running_mean), static_cast<T*>(running_var), momentum, eps, static_cast<T*>(output),
          static_cast<T*>(save_mean), static_cast<T*>(save_invstd));
      SUBLET_CUDA_LAUNCH_CHECK(batch_norm_relu_forward);
    });
  });
}

void batch_norm_relu_backward_training(const Context& ctx, const BatchNormShape& s, DType dtype,
                                       const void* grad_output, const void* output, const void* input,
                                       const void* weight, const void* save_mean, const void* save_invstd,
                                       void* grad_input, void* grad_weight, void* grad_bias, void* grad_residual) {
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    with_values_per_thread(s.batch * s.spatial(), [&](auto per_thread) {
      backward_kernel<T, decltype(per_thread)::value><<<static_cast<unsigned>(s.channels), kThreads, 0, stream>>>(
          s.batch, ChannelIndexer{s.channels, IntDivider(s.spatial())}, static_cast<const T*>(grad_output),
          static_cast<const T*>(output), static_cast<const T*>(input), static_cast<const T*>(weight),
          static_cast<const T*>(save_mean), static_cast<const T*>(save_invstd), static_cast<T*>(grad_input),
          static_cast<T*>(grad_weight), static_cast<T*>(grad_bias), static_cast<T*>(grad_residual));
      SUBLET_CUDA_LAUNCH_CHECK(batch_norm_relu_backward);
    });
  });
}

}  // namespace sublet::ops::cuda
