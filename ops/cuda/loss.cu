// log_softmax, nll_loss and cross_entropy: one block per row (sample), row statistics in double
// as in the CPU kernel (ops/cpu/loss_cpu.cpp). Batch means are summed by a single block in a
// fixed order, so the loss is deterministic; it differs from the CPU's sequential sum only by
// rounding order.
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

// log(sum(exp(row))) shifted by the row maximum; all threads of the block get the result.
template <typename T>
__device__ double row_log_sum_exp(const T* row, std::int64_t classes, double* scratch) {
  double local_max = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) local_max = fmax(local_max, double(row[j]));
  const double row_max = block_combine(local_max, scratch, [](double a, double b) { return fmax(a, b); });
  if (isinf(row_max)) return row_max;  // all -inf (or a +inf): the shift would produce NaN
  double local_sum = 0;
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) local_sum += exp(double(row[j]) - row_max);
  const double sum = block_combine(local_sum, scratch, [](double a, double b) { return a + b; });
  return row_max + log(sum);
}

template <typename T>
__device__ double row_sum(const T* row, std::int64_t classes, double* scratch) {
  double local = 0;
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) local += double(row[j]);
  return block_combine(local, scratch, [](double a, double b) { return a + b; });
}

template <typename T>
__global__ void log_softmax_forward_kernel(std::int64_t classes, const T* input, T* output) {
  __shared__ double scratch[kRowThreads];
  const T* row = input + blockIdx.x * classes;
  T* out = output + blockIdx.x * classes;
  const double lse = row_log_sum_exp(row, classes, scratch);
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) out[j] = static_cast<T>(row[j] - lse);
}

template <typename T>
__global__ void log_softmax_backward_kernel(std::int64_t classes, const T* grad_output, const T* output,
                                            T* grad_input) {
  __shared__ double scratch[kRowThreads];
  const std::int64_t base = blockIdx.x * classes;
  const double grad_sum = row_sum(grad_output + base, classes, scratch);
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    grad_input[base + j] = static_cast<T>(grad_output[base + j] - exp(double(output[base + j])) * grad_sum);
  }
}

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
    per_sample[n] = -static_cast<double>(log_probs[n * classes + targets[n]]);
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

template <typename T>
__global__ void cross_entropy_per_sample(std::int64_t classes, const T* logits, const std::int64_t* targets,
                                         double label_smoothing, double* per_sample) {
  __shared__ double scratch[kRowThreads];
  const std::int64_t n = blockIdx.x;
  const T* row = logits + n * classes;
  const double lse = row_log_sum_exp(row, classes, scratch);
  double smooth_nll = 0;  // mean over classes of -log p
  if (label_smoothing != 0) {
    double local = 0;
    for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) local += lse - row[j];
    smooth_nll = block_combine(local, scratch, [](double a, double b) { return a + b; }) / double(classes);
  }
  if (threadIdx.x == 0) {
    const double target_nll = lse - row[targets[n]];
    per_sample[n] = (1 - label_smoothing) * target_nll + label_smoothing * smooth_nll;
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel(std::int64_t classes, const T* grad_loss, const T* logits,
                                              const std::int64_t* targets, double label_smoothing, double batch,
                                              T* grad_logits) {
  __shared__ double scratch[kRowThreads];
  const std::int64_t n = blockIdx.x;
  const T* row = logits + n * classes;
  T* grad_row = grad_logits + n * classes;
  const double scale = static_cast<double>(*grad_loss) / batch;
  const double smooth_share = label_smoothing / static_cast<double>(classes);
  const double lse = row_log_sum_exp(row, classes, scratch);
  for (std::int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    const double target_share = (j == targets[n] ? 1 - label_smoothing : 0.0) + smooth_share;
    grad_row[j] = static_cast<T>(scale * (exp(row[j] - lse) - target_share));
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
  const auto bad = find_out_of_range(ctx, targets, Shape{s.batch}, Shape{1}, s.classes);
  if (bad) {
    throw ValueError(std::string(op) + ": target " + std::to_string(bad->value) + " of sample " +
                     std::to_string(bad->position) + " is outside [0, " + std::to_string(s.classes) + ")");
  }
}

unsigned rows_grid(const ClassScoresShape& s) {
  if (s.batch > 0x7fffffff) throw ShapeError("losses: at most 2^31 - 1 samples per call on CUDA");
  return static_cast<unsigned>(s.batch);
}

}  // namespace

void log_softmax_forward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* input,
                         void* output) {
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("log_softmax", dtype, [&](auto tag) {
    using T = decltype(tag);
    log_softmax_forward_kernel<T><<<rows_grid(s), kRowThreads, 0, stream_of(ctx.stream)>>>(
        s.classes, static_cast<const T*>(input), static_cast<T*>(output));
    SUBLET_CUDA_LAUNCH_CHECK(log_softmax_forward_kernel);
  });
}

void log_softmax_backward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* grad_output,
                          const void* output, void* grad_input) {
  memory::CudaDeviceGuard device(ctx.device);
  dispatch("log_softmax", dtype, [&](auto tag) {
    using T = decltype(tag);
    log_softmax_backward_kernel<T><<<rows_grid(s), kRowThreads, 0, stream_of(ctx.stream)>>>(
        s.classes, static_cast<const T*>(grad_output), static_cast<const T*>(output), static_cast<T*>(grad_input));
    SUBLET_CUDA_LAUNCH_CHECK(log_softmax_backward_kernel);
  });
}

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

void cross_entropy_forward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* logits,
                           const std::int64_t* targets, double label_smoothing, void* loss) {
  dispatch("cross_entropy", dtype, [&](auto tag) {
    using T = decltype(tag);
    check_targets(ctx, "cross_entropy", s, targets);
    memory::CudaDeviceGuard device(ctx.device);
    const cudaStream_t stream = stream_of(ctx.stream);
    auto per_sample = ctx.workspace(static_cast<std::size_t>(s.batch) * sizeof(double));
    auto* values = static_cast<double*>(per_sample.get());
    cross_entropy_per_sample<T><<<rows_grid(s), kRowThreads, 0, stream>>>(s.classes, static_cast<const T*>(logits),
                                                                           targets, label_smoothing, values);
    SUBLET_CUDA_LAUNCH_CHECK(cross_entropy_per_sample);
    batch_mean_kernel<T><<<1, kRowThreads, 0, stream>>>(s.batch, values, static_cast<T*>(loss));
    SUBLET_CUDA_LAUNCH_CHECK(batch_mean_kernel);
  });
}

void cross_entropy_backward(const Context& ctx, const ClassScoresShape& s, DType dtype, const void* grad_loss,
                            const void* logits, const std::int64_t* targets, double label_smoothing,
                            void* grad_logits) {
  dispatch("cross_entropy", dtype, [&](auto tag) {
    using T = decltype(tag);
    check_targets(ctx, "cross_entropy", s, targets);
    memory::CudaDeviceGuard device(ctx.device);
    cross_entropy_backward_kernel<T><<<rows_grid(s), kRowThreads, 0, stream_of(ctx.stream)>>>(
        s.classes, static_cast<const T*>(grad_loss), static_cast<const T*>(logits), targets, label_smoothing,
        static_cast<double>(s.batch), static_cast<T*>(grad_logits));
    SUBLET_CUDA_LAUNCH_CHECK(cross_entropy_backward_kernel);
  });
}

}  // namespace sublet::ops::cuda
