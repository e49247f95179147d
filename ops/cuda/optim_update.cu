// Multi-tensor optimizer updates: ONE update kernel for all parameters of a step.
// - The launch's tensors are described by a table in device memory (pointers, sizes, the chunk
//   each tensor starts at). The table is written by a small kernel that takes up to
//   kEntriesPerUpload entries by value (kernel parameters stay under the classic 4 KiB limit), so
//   building it is capturable: in a CUDA graph the entries are part of the graph, as the pointers
//   of a captured step are fixed anyway. No host-to-device copy of pageable memory is involved
//   (that would be illegal during capture).
// - Each tensor is cut into chunks of kChunk elements; one block per chunk finds its tensor by a
//   binary search over the table, so a 25M-parameter model is ~3,100 blocks and a tiny bias one.
// - lr and Adam's t come from the launch (baked into a graph) or, when the caller gives one,
//   from a device array read at run time (a graph follows whatever was written there).
// - Loss scaling: every block reads the found-inf flag first and returns when it is set, so a
//   skipped step costs one load per block and no host read. Counts advanced by the launch
//   (UpdateScalars::advance_counts) are advanced by one small kernel before the update (each
//   slot by one thread; the update blocks read the new values after it), under the same flag.
// The table's workspace goes back to the allocator as soon as the kernel is enqueued
// (stream-ordered, like every workspace).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/multi_tensor_table.cuh"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/device_math.cuh"
#include "ops/cuda/optim_update_cuda.h"

namespace sublet::ops::cuda {
namespace {

// Elements per block. With four times as many, ResNet-18's 11.2M parameters would make only 342
// blocks of 256 threads, under a third of an H100's resident threads: too few loads in flight to
// keep HBM busy.
constexpr std::int64_t kChunk = 8192;
constexpr int kUpdateThreads = 256;
constexpr std::uint32_t kFirstStep = 1;  // SGD: the momentum buffer is new

struct alignas(16) Entry {
  void* ptr[4];              // param, grad, state 0, state 1
  std::int64_t numel;
  double step;               // Adam's t when the scalars are not on the device
  std::int32_t chunk_begin;  // first chunk of this tensor in the launch
  std::int32_t index;        // slot of the tensor's t in the device scalars
  std::uint32_t flags;
};
static_assert(sizeof(Entry) == 64);

constexpr int kEntriesPerUpload = 60;
struct UploadBatch {
  Entry entries[kEntriesPerUpload];
  std::int32_t count;
  std::int32_t offset;
};
static_assert(sizeof(UploadBatch) <= 4000, "kernel parameters must stay under 4 KiB");

// Loss scaling's part of a launch (UpdateScalars::found_inf, inv_scale, advance_counts).
struct ScaleArgs {
  const float* found_inf;
  const float* inv_scale;
  bool advance;
};

// Uniform over a block (every thread reads the same flag), so a block may return before a barrier.
__device__ inline bool skip_update(const ScaleArgs& s) { return s.found_inf && *s.found_inf != 0.0f; }  // NaN too

// The unscaled gradient, rounded on its own as GradScaler's separate mul_ rounds it (no
// contraction into the update's FMAs), written back so that the gradient ends unscaled.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
template <typename T>
__device__ inline T unscaled_grad(T* grad, std::int64_t i, const ScaleArgs& s, T inv) {
  if (!s.inv_scale) return grad[i];
  const T g = mul_rn(grad[i], inv);
  grad[i] = g;
  return g;
}

__global__ void advance_counts_kernel(const Entry* table, int count, double* scalars, std::int64_t counter_slot,
                                      const float* found_inf) {
  if (found_inf && *found_inf != 0.0f) return;
  for (int i = threadIdx.x; i < count; i += blockDim.x) scalars[1 + table[i].index] += 1.0;
  if (threadIdx.x == 0 && counter_slot >= 0) scalars[1 + counter_slot] += 1.0;
}

using multi_tensor::entry_of_block;
// One instantiation, named, so that the launch check can name it.
constexpr auto write_table_kernel = &multi_tensor::write_table_kernel<UploadBatch, Entry>;

// GradScaler's check (ops::mark_non_finite): NaN into *found_inf when the block's chunk holds
// an inf or NaN. Several blocks may write; they all write the same value.
template <typename T>
__global__ void __launch_bounds__(kUpdateThreads) non_finite_kernel(const Entry* table, int count, float* found_inf) {
  const Entry& e = entry_of_block(table, count);
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x - e.chunk_begin) * kChunk;
  const std::int64_t end = begin + kChunk < e.numel ? begin + kChunk : e.numel;
  const T* data = static_cast<const T*>(e.ptr[0]);
  bool bad = false;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) bad = bad || !isfinite(data[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = __int_as_float(0x7fc00000);  // quiet NaN
}

struct SgdArgs {
  double lr;
  double momentum, dampening, weight_decay;
  bool nesterov;
};

template <typename T>
__global__ void __launch_bounds__(kUpdateThreads)
sgd_kernel(const Entry* table, int count, const double* scalars, SgdArgs a, ScaleArgs s) {
  if (skip_update(s)) return;
  const Entry& e = entry_of_block(table, count);
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x - e.chunk_begin) * kChunk;
  const std::int64_t end = begin + kChunk < e.numel ? begin + kChunk : e.numel;
  T* p = static_cast<T*>(e.ptr[0]);
  T* grad = static_cast<T*>(e.ptr[1]);
  T* buf = static_cast<T*>(e.ptr[2]);
  const double lr = scalars ? scalars[0] : a.lr;
  const T weight_decay = static_cast<T>(a.weight_decay), momentum = static_cast<T>(a.momentum);
  const T keep = static_cast<T>(1.0 - a.dampening), step = static_cast<T>(-lr);
  const bool decay = a.weight_decay != 0.0, use_momentum = a.momentum != 0.0;
  // A count of 1 after the advance: the buffer's first real update (a skipped step may have made it).
  const bool first = (e.flags & kFirstStep) != 0 || (s.advance && scalars[1 + e.index] == 1.0);
  const T inv = s.inv_scale ? static_cast<T>(*s.inv_scale) : T(1);
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    T g = unscaled_grad(grad, i, s, inv);
    const T pi = p[i];
    if (decay) g = g + weight_decay * pi;
    if (use_momentum) {
      T b;
      if (first) {
        b = g;
      } else {
        const T decayed = buf[i] * momentum;
        b = decayed + keep * g;
      }
      buf[i] = b;
      g = a.nesterov ? g + momentum * b : b;
    }
    p[i] = pi + step * g;
  }
}

struct AdamArgs {
  double lr;
  double beta1, beta2, eps, weight_decay;
  bool decoupled;
};

template <typename T>
__global__ void __launch_bounds__(kUpdateThreads)
adam_kernel(const Entry* table, int count, const double* scalars, AdamArgs a, ScaleArgs s) {
  if (skip_update(s)) return;
  const Entry& e = entry_of_block(table, count);
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x - e.chunk_begin) * kChunk;
  const std::int64_t end = begin + kChunk < e.numel ? begin + kChunk : e.numel;
  T* p = static_cast<T*>(e.ptr[0]);
  T* grad = static_cast<T*>(e.ptr[1]);
  T* m = static_cast<T*>(e.ptr[2]);
  T* v = static_cast<T*>(e.ptr[3]);
  const double lr = scalars ? scalars[0] : a.lr;
  const double t = scalars ? scalars[1 + e.index] : e.step;
  const double bias_correction1 = 1.0 - pow(a.beta1, t);
  const double bias_correction2 = 1.0 - pow(a.beta2, t);
  const T beta1 = static_cast<T>(a.beta1), beta2 = static_cast<T>(a.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - a.beta1), one_minus_beta2 = static_cast<T>(1.0 - a.beta2);
  const T weight_decay = static_cast<T>(a.weight_decay), shrink = static_cast<T>(1.0 - lr * a.weight_decay);
  const T sqrt_bc2 = static_cast<T>(sqrt(bias_correction2)), eps = static_cast<T>(a.eps);
  const T step_size = static_cast<T>(-lr / bias_correction1);
  const bool decay = a.weight_decay != 0.0;
  const T inv = s.inv_scale ? static_cast<T>(*s.inv_scale) : T(1);
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    T g = unscaled_grad(grad, i, s, inv);
    T pi = p[i];
    if (decay) {
      if (a.decoupled) pi = pi * shrink; else g = g + weight_decay * pi;
    }
    const T mi = m[i] * beta1 + one_minus_beta1 * g;
    const T vi = v[i] * beta2 + one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const T denom = device_sqrt(vi) / sqrt_bc2 + eps;
    p[i] = pi + step_size * mi / denom;
  }
}

// Builds the device table for `entries` and returns the number of blocks (chunks) of the launch.
// Empty tensors have no chunks (they are in the table only when their counts advance; the
// block-to-entry search skips them). The workspace must outlive the launch's enqueue.
std::int32_t upload_table(const Context& ctx, std::vector<Entry>& entries, memory::ScopedBlock& workspace) {
  std::int64_t chunks = 0;
  for (Entry& e : entries) {
    e.chunk_begin = static_cast<std::int32_t>(chunks);
    chunks += (e.numel + kChunk - 1) / kChunk;
  }
  if (chunks > std::int64_t{0x7fffffff})
    throw ValueError("optimizer update: " + std::to_string(chunks) + " chunks exceed one launch");
  workspace = ctx.workspace(entries.size() * sizeof(Entry));
  auto* table = static_cast<Entry*>(workspace.get());
  const cudaStream_t stream = stream_of(ctx.stream);
  for (std::size_t offset = 0; offset < entries.size(); offset += kEntriesPerUpload) {
    UploadBatch batch{};
    batch.count = static_cast<std::int32_t>(std::min<std::size_t>(kEntriesPerUpload, entries.size() - offset));
    batch.offset = static_cast<std::int32_t>(offset);
    std::copy_n(entries.begin() + static_cast<std::ptrdiff_t>(offset), batch.count, batch.entries);
    write_table_kernel<<<1, 64, 0, stream>>>(batch, table);
    SUBLET_CUDA_LAUNCH_CHECK(write_table_kernel);
  }
  return static_cast<std::int32_t>(chunks);
}

// The counts' advance (before the update blocks read them), under the found-inf flag.
void advance_counts(const Context& ctx, const std::vector<Entry>& entries, const memory::ScopedBlock& workspace,
                    const UpdateScalars& scalars) {
  if (!scalars.advance_counts) return;
  advance_counts_kernel<<<1, 256, 0, stream_of(ctx.stream)>>>(static_cast<const Entry*>(workspace.get()),
                                                             static_cast<int>(entries.size()), scalars.device,
                                                             scalars.counter_slot, scalars.found_inf);
  SUBLET_CUDA_LAUNCH_CHECK(advance_counts_kernel);
}

template <typename F>
void dispatch(DType dtype, const char* op, F&& f) {
  if (dtype == DType::Float32) return f(float{});
  if (dtype == DType::Float64) return f(double{});
  throw DTypeError(std::string(op) + ": expected float32 or float64, got " + dtype_name(dtype));
}

}  // namespace

void sgd_update(const Context& ctx, DType dtype, std::span<const SgdTensor> tensors, const SgdHyper& hyper,
                const UpdateScalars& scalars) {
  std::vector<Entry> entries;
  entries.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SgdTensor& t = tensors[i];
    if (t.numel == 0 && !scalars.advance_counts) continue;
    Entry e{};
    e.ptr[0] = t.param;
    e.ptr[1] = t.grad;
    e.ptr[2] = t.momentum_buffer;
    e.numel = t.numel;
    e.index = static_cast<std::int32_t>(t.step_slot >= 0 ? t.step_slot : static_cast<std::int64_t>(i));
    e.flags = t.first ? kFirstStep : 0;
    entries.push_back(e);
  }
  if (entries.empty()) return;
  memory::CudaDeviceGuard device(ctx.device);
  memory::ScopedBlock workspace;
  const std::int32_t blocks = upload_table(ctx, entries, workspace);
  advance_counts(ctx, entries, workspace, scalars);
  if (blocks == 0) return;
  const SgdArgs args{scalars.lr, hyper.momentum, hyper.dampening, hyper.weight_decay, hyper.nesterov};
  const ScaleArgs scale{scalars.found_inf, scalars.inv_scale, scalars.advance_counts};
  dispatch(dtype, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    sgd_kernel<T><<<blocks, kUpdateThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const Entry*>(workspace.get()), static_cast<int>(entries.size()), scalars.device, args, scale);
    SUBLET_CUDA_LAUNCH_CHECK(sgd_kernel);
  });
}

void adam_update(const Context& ctx, DType dtype, std::span<const AdamTensor> tensors, const AdamHyper& hyper,
                 const UpdateScalars& scalars) {
  std::vector<Entry> entries;
  entries.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const AdamTensor& t = tensors[i];
    if (t.numel == 0 && !scalars.advance_counts) continue;
    Entry e{};
    e.ptr[0] = t.param;
    e.ptr[1] = t.grad;
    e.ptr[2] = t.exp_avg;
    e.ptr[3] = t.exp_avg_sq;
    e.numel = t.numel;
    e.step = static_cast<double>(t.step);
    e.index = static_cast<std::int32_t>(t.step_slot >= 0 ? t.step_slot : static_cast<std::int64_t>(i));
    entries.push_back(e);
  }
  if (entries.empty()) return;
  memory::CudaDeviceGuard device(ctx.device);
  memory::ScopedBlock workspace;
  const std::int32_t blocks = upload_table(ctx, entries, workspace);
  advance_counts(ctx, entries, workspace, scalars);
  if (blocks == 0) return;
  const AdamArgs args{scalars.lr, hyper.beta1, hyper.beta2, hyper.eps, hyper.weight_decay,
                      hyper.decoupled_weight_decay};
  const ScaleArgs scale{scalars.found_inf, scalars.inv_scale, scalars.advance_counts};
  dispatch(dtype, "adam_update", [&](auto tag) {
    using T = decltype(tag);
    adam_kernel<T><<<blocks, kUpdateThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const Entry*>(workspace.get()), static_cast<int>(entries.size()), scalars.device, args, scale);
    SUBLET_CUDA_LAUNCH_CHECK(adam_kernel);
  });
}

void mark_non_finite(const Context& ctx, DType dtype, std::span<const FiniteCheckTensor> tensors, float* found_inf) {
  std::vector<Entry> entries;
  entries.reserve(tensors.size());
  for (const FiniteCheckTensor& t : tensors) {
    if (t.numel == 0) continue;
    Entry e{};
    e.ptr[0] = const_cast<void*>(t.data);  // read only
    e.numel = t.numel;
    entries.push_back(e);
  }
  if (entries.empty()) return;
  memory::CudaDeviceGuard device(ctx.device);
  memory::ScopedBlock workspace;
  const std::int32_t blocks = upload_table(ctx, entries, workspace);
  dispatch(dtype, "mark_non_finite", [&](auto tag) {
    using T = decltype(tag);
    non_finite_kernel<T><<<blocks, kUpdateThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const Entry*>(workspace.get()), static_cast<int>(entries.size()), found_inf);
    SUBLET_CUDA_LAUNCH_CHECK(non_finite_kernel);
  });
}

void write_update_scalars(const Context& ctx, double* device_values, const double* host_values, std::int64_t count) {
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SUBLET_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusNone)
    throw Error("write_update_scalars: the stream is capturing a CUDA graph; write the scalars before replay instead");
  // From pageable memory the driver stages the bytes before returning: the caller may reuse them.
  SUBLET_CUDA_CHECK(cudaMemcpyAsync(device_values, host_values, static_cast<std::size_t>(count) * sizeof(double),
                                    cudaMemcpyHostToDevice, stream));
}

}  // namespace sublet::ops::cuda
