// The global norm and the clip scale of a tensor list in a few launches for the whole list, on
// the multi-tensor pattern of ops/cuda/optim_update.cu:
// - The tensors are described by a table in device memory (pointer, size, dtype, first chunk),
//   written by a small kernel that takes up to kEntriesPerUpload entries by value, so that
//   building it is capturable (no host-to-device copy).
// - Each tensor is cut into chunks of kChunk elements; one block per chunk finds its tensor by a
//   binary search over the table and reads it in its own dtype, 16 bytes per load where the
//   tensor's address allows.
// - Norm: each block writes its chunk's partial (a fixed-order tree over the block), then one
//   block combines the partials in a fixed order in float64 and writes the norm: the same bits on
//   every run. Launches: the table (one per kEntriesPerUpload tensors), the partials, the finish.
// - Scale: each block reads the norm when it runs and computes the coefficient itself, so there
//   is no host read; a coefficient of 1 returns at once. Launches: the table and the scale.
// The workspaces (table, partials) go back to the allocator as soon as the kernels are enqueued
// (stream-ordered, like every workspace).
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/multi_tensor_table.cuh"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/multi_tensor_norm_cuda.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/vector_pack.cuh"
#include "ops/multi_tensor_norm_math.h"

namespace sublet::ops::cuda {
namespace {

using norm_math::NormKind;

// Elements per block, as the optimizer updates: enough blocks to fill the GPU for a model of a
// few million parameters, few enough partials for one finishing block.
constexpr std::int64_t kChunk = 8192;
constexpr int kThreads = 256;
constexpr int kFinishThreads = 512;

enum ElementType : std::int32_t { kFloat32, kFloat64, kBFloat16, kFloat16 };

struct Entry {
  void* data;
  std::int64_t numel;
  std::int32_t chunk_begin;  // first chunk of this tensor in the launch
  std::int32_t element;      // ElementType
};
static_assert(sizeof(Entry) == 24);

constexpr int kEntriesPerUpload = 160;
struct UploadBatch {
  Entry entries[kEntriesPerUpload];
  std::int32_t count;
  std::int32_t offset;
};
static_assert(sizeof(UploadBatch) <= 4000, "kernel parameters must stay under 4 KiB");

using multi_tensor::entry_of_block;
// One instantiation, named, so that the launch check can name it.
constexpr auto write_table_kernel = &multi_tensor::write_table_kernel<UploadBatch, Entry>;

// f(T{}) with T the device type of the entry's elements (uniform over a block).
template <typename F>
__device__ void dispatch_element(std::int32_t element, F&& f) {
  switch (element) {
    case kFloat32: f(float{}); break;
    case kFloat64: f(double{}); break;
    case kBFloat16: f(__nv_bfloat16{}); break;
    default: f(__half{}); break;
  }
}

// This thread's combined terms over n elements from x (a chunk of one tensor).
template <typename T, typename A, NormKind K>
__device__ A chunk_terms(const T* x, std::int64_t n, A p) {
  constexpr int V = 16 / sizeof(T);
  A acc = A(0);
  std::int64_t rest = 0;
  if (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
    const std::int64_t packs = n / V;
    for (std::int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const Pack<T, V> pack = load_pack<T, V>(x, i * V);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        acc = norm_math::combine<K>(acc, norm_math::term<K>(static_cast<A>(load_compute(pack.v[j])), p));
      }
    }
    rest = packs * V;
  }
  for (std::int64_t i = rest + threadIdx.x; i < n; i += blockDim.x) {
    acc = norm_math::combine<K>(acc, norm_math::term<K>(static_cast<A>(load_compute(x[i])), p));
  }
  return acc;
}

template <typename A, NormKind K>
__global__ void __launch_bounds__(kThreads) norm_partials_kernel(const Entry* table, int count, A p, A* partials) {
  __shared__ A scratch[kThreads];
  const Entry e = entry_of_block(table, count);
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x - e.chunk_begin) * kChunk;
  const std::int64_t n = e.numel - begin < kChunk ? e.numel - begin : kChunk;
  A acc = A(0);
  dispatch_element(e.element, [&](auto tag) {
    using T = decltype(tag);
    acc = chunk_terms<T, A, K>(static_cast<const T*>(e.data) + begin, n, p);
  });
  acc = block_combine(acc, scratch, [](A a, A b) { return norm_math::combine<K>(a, b); });
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// One block: the partials in a fixed order, in float64, then the norm rounded once.
template <typename N, NormKind K>
__global__ void __launch_bounds__(kFinishThreads) norm_finish_kernel(const N* partials, int count, double p, N* norm) {
  __shared__ double scratch[kFinishThreads];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    acc = norm_math::combine<K>(acc, static_cast<double>(partials[i]));
  }
  acc = block_combine(acc, scratch, [](double a, double b) { return norm_math::combine<K>(a, b); });
  if (threadIdx.x == 0) *norm = static_cast<N>(norm_math::finish<K>(acc, p));
}

// The coefficient in T's storage, as the CPU kernel rounds it (a float64 one through float32).
template <typename T, typename N>
__device__ T coefficient_in(N coefficient) {
  if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(coefficient);
  } else {
    return store_compute<T>(static_cast<float>(coefficient));
  }
}

template <typename T, typename N>
__device__ void scale_chunk(T* x, std::int64_t n, N coefficient) {
  using C = ComputeType<T>;
  constexpr int V = 16 / sizeof(T);
  const C scale = load_compute(coefficient_in<T>(coefficient));
  std::int64_t rest = 0;
  if (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) {
    const std::int64_t packs = n / V;
    for (std::int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      Pack<T, V> pack = load_pack<T, V>(x, i * V);
#pragma unroll
      for (int j = 0; j < V; ++j) pack.v[j] = store_compute<T>(load_compute(pack.v[j]) * scale);
      store_pack<T, V>(x, i * V, pack);
    }
    rest = packs * V;
  }
  for (std::int64_t i = rest + threadIdx.x; i < n; i += blockDim.x) x[i] = store_compute<T>(load_compute(x[i]) * scale);
}

template <typename N>
__global__ void __launch_bounds__(kThreads)
clip_scale_kernel(const Entry* table, int count, const N* norm, double max_norm) {
  const N coefficient = norm_math::clip_coefficient<N>(*norm, max_norm);
  if (coefficient == N(1)) return;  // the same for every block
  const Entry e = entry_of_block(table, count);
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.x - e.chunk_begin) * kChunk;
  const std::int64_t n = e.numel - begin < kChunk ? e.numel - begin : kChunk;
  dispatch_element(e.element, [&](auto tag) {
    using T = decltype(tag);
    scale_chunk<T>(static_cast<T*>(e.data) + begin, n, coefficient);
  });
}

std::int32_t element_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return kFloat32;
    case DType::Float64: return kFloat64;
    case DType::BFloat16: return kBFloat16;
    case DType::Float16: return kFloat16;
    default: throw DTypeError(std::string("multi_tensor_norm: no CUDA kernel reads ") + dtype_name(dtype));
  }
}

// The table of the non-empty tensors, written to device memory; returns the number of chunks
// (blocks) of a launch over it, 0 (and no launch) when there is nothing to read.
std::int32_t upload_table(const Context& ctx, std::span<const NormTensor> tensors, std::vector<Entry>& entries,
                          memory::ScopedBlock& workspace) {
  std::int64_t chunks = 0;
  for (const NormTensor& t : tensors) {
    if (t.numel == 0) continue;
    entries.push_back(Entry{t.data, t.numel, static_cast<std::int32_t>(chunks), element_type(t.dtype)});
    chunks += (t.numel + kChunk - 1) / kChunk;
    if (chunks > std::int64_t{0x7fffffff})
      throw ValueError("multi_tensor_norm: more than 2^31 chunks of " + std::to_string(kChunk) + " elements");
  }
  if (entries.empty()) return 0;
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

template <typename F>
void dispatch_norm_dtype(DType dtype, const char* op, F&& f) {
  if (dtype == DType::Float32) return f(float{});
  if (dtype == DType::Float64) return f(double{});
  throw DTypeError(std::string(op) + ": expected a float32 or float64 norm, got " + dtype_name(dtype));
}

template <typename F>
void dispatch_kind(NormKind kind, F&& f) {
  switch (kind) {
    case NormKind::Squares: return f(std::integral_constant<NormKind, NormKind::Squares>{});
    case NormKind::Abs: return f(std::integral_constant<NormKind, NormKind::Abs>{});
    case NormKind::Pow: return f(std::integral_constant<NormKind, NormKind::Pow>{});
    case NormKind::Max: return f(std::integral_constant<NormKind, NormKind::Max>{});
  }
}

}  // namespace

void multi_tensor_norm(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors, double norm_type,
                       void* norm) {
  memory::CudaDeviceGuard device(ctx.device);
  std::vector<Entry> entries;
  memory::ScopedBlock table, partials;
  const std::int32_t blocks = upload_table(ctx, tensors, entries, table);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_norm_dtype(norm_dtype, "multi_tensor_norm", [&](auto tag) {
    using N = decltype(tag);
    if (blocks > 0) partials = ctx.workspace(static_cast<std::size_t>(blocks) * sizeof(N));
    auto* partial = static_cast<N*>(partials.get());
    dispatch_kind(norm_math::kind_of(norm_type), [&](auto kind) {
      constexpr NormKind K = decltype(kind)::value;
      if (blocks > 0) {
        norm_partials_kernel<N, K><<<blocks, kThreads, 0, stream>>>(static_cast<const Entry*>(table.get()),
                                                                    static_cast<int>(entries.size()),
                                                                    static_cast<N>(norm_type), partial);
        SUBLET_CUDA_LAUNCH_CHECK(norm_partials_kernel);
      }
      // With no partials it writes the empty list's norm, 0.
      norm_finish_kernel<N, K><<<1, kFinishThreads, 0, stream>>>(partial, blocks, norm_type, static_cast<N*>(norm));
      SUBLET_CUDA_LAUNCH_CHECK(norm_finish_kernel);
    });
  });
}

void multi_tensor_clip_scale(const Context& ctx, DType norm_dtype, std::span<const NormTensor> tensors,
                             const void* norm, double max_norm) {
  memory::CudaDeviceGuard device(ctx.device);
  std::vector<Entry> entries;
  memory::ScopedBlock table;
  const std::int32_t blocks = upload_table(ctx, tensors, entries, table);
  if (blocks == 0) return;
  dispatch_norm_dtype(norm_dtype, "multi_tensor_clip_scale", [&](auto tag) {
    using N = decltype(tag);
    clip_scale_kernel<N><<<blocks, kThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const Entry*>(table.get()), static_cast<int>(entries.size()), static_cast<const N*>(norm),
        max_norm);
    SUBLET_CUDA_LAUNCH_CHECK(clip_scale_kernel);
  });
}

}  // namespace sublet::ops::cuda
