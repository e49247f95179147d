// Backward of inference-mode batch norm (the running statistics are constants):
//   grad_input = grad_output * invstd * weight,
//   grad_weight = sum(grad_output * (input - running_mean)) * invstd, grad_bias = sum(grad_output),
// with invstd = 1/sqrt(running_var + eps) in double and the sums in double, as the CPU kernel.
#include "ops/cuda/batch_norm_cuda.h"
#include "ops/cuda/block_reduce.cuh"
#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/launch.cuh"

namespace sublet::ops::cuda {
namespace {

constexpr int kChannelThreads = 256;  // a power of two (block_combine)

template <typename T>
__device__ double eval_invstd(const T* running_var, std::int64_t c, double eps) {
  return 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
}

// One block per channel.
template <typename T>
__global__ void parameter_grads(std::int64_t batch, std::int64_t channels, std::int64_t spatial, const T* grad_output,
                                const T* input, const T* running_mean, const T* running_var, double eps,
                                T* grad_weight, T* grad_bias) {
  __shared__ double scratch[kChannelThreads];
  const std::int64_t c = blockIdx.x;
  const double mean = running_mean[c];
  const std::int64_t count = batch * spatial;
  double grad_sum = 0, grad_centered_sum = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const std::int64_t offset = ((i / spatial) * channels + c) * spatial + i % spatial;
    const double g = grad_output[offset];
    grad_sum += g;
    grad_centered_sum += g * (static_cast<double>(input[offset]) - mean);
  }
  auto add = [](double a, double b) { return a + b; };
  grad_sum = block_combine(grad_sum, scratch, add);
  grad_centered_sum = block_combine(grad_centered_sum, scratch, add);
  if (threadIdx.x == 0) {
    if (grad_weight != nullptr) grad_weight[c] = static_cast<T>(grad_centered_sum * eval_invstd(running_var, c, eps));
    if (grad_bias != nullptr) grad_bias[c] = static_cast<T>(grad_sum);
  }
}

template <typename T>
__global__ void input_grad(std::int64_t numel, std::int64_t channels, std::int64_t spatial, const T* grad_output,
                           const T* weight, const T* running_var, double eps, T* grad_input) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    const std::int64_t c = (i / spatial) % channels;
    const double scale = eval_invstd(running_var, c, eps) * (weight ? static_cast<double>(weight[c]) : 1.0);
    grad_input[i] = grad_output[i] * static_cast<T>(scale) + T(0);
  }
}

template <typename T>
void backward_eval(const Context& ctx, const BatchNormShape& s, const T* grad_output, const T* input, const T* weight,
                   const T* running_mean, const T* running_var, double eps, T* grad_input, T* grad_weight,
                   T* grad_bias) {
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  if (grad_weight != nullptr || grad_bias != nullptr) {
    parameter_grads<T><<<static_cast<unsigned>(s.channels), kChannelThreads, 0, stream>>>(
        s.batch, s.channels, s.spatial(), grad_output, input, running_mean, running_var, eps, grad_weight, grad_bias);
    SUBLET_CUDA_LAUNCH_CHECK(parameter_grads);
  }
  if (grad_input != nullptr) {
    input_grad<T><<<grid_for(s.numel()), kBlockThreads, 0, stream>>>(s.numel(), s.channels, s.spatial(), grad_output,
                                                                      weight, running_var, eps, grad_input);
    SUBLET_CUDA_LAUNCH_CHECK(input_grad);
  }
}

}  // namespace

void batch_norm_backward_eval(const Context& ctx, const BatchNormShape& shape, DType dtype, const void* grad_output,
                              const void* input, const void* weight, const void* running_mean,
                              const void* running_var, double eps, void* grad_input, void* grad_weight,
                              void* grad_bias) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    backward_eval<T>(ctx, shape, static_cast<const T*>(grad_output), static_cast<const T*>(input),
                     static_cast<const T*>(weight), static_cast<const T*>(running_mean),
                     static_cast<const T*>(running_var), eps, static_cast<T*>(grad_input),
                     static_cast<T*>(grad_weight), static_cast<T*>(grad_bias));
  };
  if (dtype == DType::Float32) {
    run(float{});
  } else if (dtype == DType::Float64) {
    run(double{});
  } else {
    throw DTypeError(std::string("batch_norm: expected float32 or float64, got ") + dtype_name(dtype));
  }
}

}  // namespace sublet::ops::cuda
