// nll_loss: per-sample values in double, their batch mean summed by a single block in a fixed
// order, so the loss is deterministic; it differs from the CPU's sequential sum only by rounding
// order. (log_softmax is in ops/cuda/softmax.cu, cross_entropy in ops/cuda/cross_entropy.cu.)
#include <cmath>
#include <string>

#include "ops/cuda/block_reduce.cuh"
#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/index_check.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/loss_cuda.h"

namespace sublet::ops::cuda {
namespace {

constexpr int kRowThreads = 256;  // a power of two (block_combine)

// Sum of per-sample values, divided by the batch size, into one element (one block).
template <typename T>
__global__ void batch_mean_kernel(std::int64_t batch, const double* per_sample, T* loss) {
  __shared__ double scratch[kRowThreads];
  double local = 0;
  for (std::int64_t n = threadIdx.x; n < batch; n += blockDim.x) local += per_sample[n];
  const double total = block_combine(local, scratch, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) *loss = static_cast<T>(total / static_cast<double>(batch));
}

template <typename T>
__global__ void nll_per_sample(std::int64_t batch, std::int64_t classes, const T* log_probs,
                               const std::int64_t* targets, double* per_sample) {
  for (std::int64_t n = global_thread_index(); n < batch; n += grid_threads()) {
    // A target outside [0, classes) is reported by a captured check after the replay (ops/cuda/index_check.h).
    const std::int64_t t = targets[n];
    per_sample[n] = t >= 0 && t < classes ? -static_cast<double>(log_probs[n * classes + t]) : NAN;
  }
}

template <typename T>
__global__ void nll_backward_kernel(std::int64_t numel, std::int64_t classes, const T* grad_loss,
                                    const std::int64_t* targets, double batch, T* grad_log_probs) {
  const T share = static_cast<T>(-static_cast<double>(*grad_loss) / batch);
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    const std::int64_t n = i / classes, j = i % classes;
    grad_log_probs[i] = j == targets[n] ? share : T(0);
  }
}

template <typename F>
void dispatch(const char* op, DType dtype, F&& f) {
  if (dtype == DType::Float32) {
    f(float{});
  } else if (dtype == DType::Float64) {
    f(double{});
  } else {
    throw DTypeError(std::string(op) + ": expected float32 or float64, got " + dtype_name(dtype));
  }
}

void check_targets(const Context& ctx, const char* op, const ClassScoresShape& s, const std::int64_t* targets) {
  check_in_range(ctx, targets, Shape{s.batch}, Shape{1}, s.classes, std::nullopt,
                 [name = std::string(op), classes = s.classes](const OutOfRange& bad) {
                   throw ValueError(name + ": target " + std::to_string(bad.value) + " of sample " +
                                    std::to_string(bad.position) + " is outside [0, " + std::to_string(classes) + ")");
                 });
}

}  // namespace

void nll_loss_forward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* log_probs,
                      const std::int64_t* targets, void* loss) {
  dispatch("nll_loss", dtype, [&](auto tag) {
    using T = decltype(tag);
    check_targets(ctx, "nll_loss", s, targets);
    memory::CudaDeviceGuard device(ctx.device);
    const cudaStream_t stream = stream_of(ctx.stream);
    auto per_sample = ctx.workspace(static_cast<std::size_t>(s.batch) * sizeof(double));
    auto* values = static_cast<double*>(per_sample.get());
    nll_per_sample<T><<<grid_for(s.batch), kBlockThreads, 0, stream>>>(s.batch, s.classes,
                                                                        static_cast<const T*>(log_probs), targets,
                                                                        values);
    SUBLET_CUDA_LAUNCH_CHECK(nll_per_sample);
    batch_mean_kernel<T><<<1, kRowThreads, 0, stream>>>(s.batch, values, static_cast<T*>(loss));
    SUBLET_CUDA_LAUNCH_CHECK(batch_mean_kernel);
  });
}

void nll_loss_backward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* grad_loss,
                       const std::int64_t* targets, void* grad_log_probs) {
  dispatch("nll_loss", dtype, [&](auto tag) {
    using T = decltype(tag);
    check_targets(ctx, "nll_loss", s, targets);
    memory::CudaDeviceGuard device(ctx.device);
    nll_backward_kernel<T><<<grid_for(s.numel()), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        s.numel(), s.classes, static_cast<const T*>(grad_loss), targets, static_cast<double>(s.batch),
        static_cast<T*>(grad_log_probs));
    SUBLET_CUDA_LAUNCH_CHECK(nll_backward_kernel);
  });
}

}  // namespace sublet::ops::cuda
