// Embedding lookup (a row gather) and its gradient (a row scatter-add into the table). An id
// outside the table gives a zero row and no gradient instead of an access out of bounds: a
// captured check reports it only after the replay (ops/cuda/index_check.h).
#include <cub/device/device_radix_sort.cuh>

#include <climits>
#include <string>
#include <type_traits>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/embedding_cuda.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/index_check.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

__device__ inline bool in_table(std::int64_t id, std::int64_t rows) { return id >= 0 && id < rows; }

template <typename T>
__global__ void gather_rows(std::int64_t numel, std::int64_t dim, std::int64_t rows, const T* table,
                            const std::int64_t* ids, T* out) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    const std::int64_t row = i / dim, col = i - row * dim;
    const std::int64_t id = ids[row];
    out[i] = in_table(id, rows) ? table[id * dim + col] : T(0);
  }
}

template <typename T>
__global__ void scatter_add_rows(std::int64_t numel, std::int64_t dim, std::int64_t rows, const T* grad,
                                 const std::int64_t* ids, T* table) {
  for (std::int64_t i = global_thread_index(); i < numel; i += grid_threads()) {
    const std::int64_t row = i / dim, col = i - row * dim;
    const std::int64_t id = ids[row];
    if (in_table(id, rows)) atomicAdd(table + id * dim + col, grad[i]);
  }
}

__global__ void iota(std::int64_t count, std::int64_t* positions) {
  for (std::int64_t i = global_thread_index(); i < count; i += grid_threads()) positions[i] = i;
}

// Block (p, column tile): when p starts a run of equal sorted ids, sums that run's gradient rows
// in their original order (the stable sort keeps it) into the id's table row.
template <typename T>
__global__ void sum_sorted_runs(std::int64_t count, std::int64_t dim, std::int64_t rows,
                                const std::int64_t* sorted_ids, const std::int64_t* positions, const T* grad,
                                T* table) {
  const std::int64_t p = blockIdx.x;
  const std::int64_t id = sorted_ids[p];
  if (!in_table(id, rows) || (p > 0 && sorted_ids[p - 1] == id)) return;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (col >= dim) return;
  Acc<T> sum = 0;
  for (std::int64_t q = p; q < count && sorted_ids[q] == id; ++q) {
    sum += static_cast<Acc<T>>(load_compute(grad[positions[q] * dim + col]));
  }
  table[id * dim + col] = store_compute<T>(static_cast<ComputeType<T>>(sum));
}

int bits_for(std::int64_t num_embeddings) {
  int bits = 1;
  while (bits < 63 && (std::int64_t{1} << bits) < num_embeddings) ++bits;
  return bits;
}

template <typename T>
void backward_sorted(const Context& ctx, const EmbeddingShape& s, const T* grad, const std::int64_t* ids, T* table,
                     cudaStream_t stream) {
  constexpr int kThreads = 128;
  if (s.count > INT_MAX) throw ShapeError("embedding_backward: at most 2^31 - 1 ids per call in deterministic mode");
  const int count = static_cast<int>(s.count);
  auto sorted_block = ctx.workspace(static_cast<std::size_t>(count) * sizeof(std::int64_t));
  auto positions_block = ctx.workspace(static_cast<std::size_t>(count) * sizeof(std::int64_t));
  auto sorted_positions_block = ctx.workspace(static_cast<std::size_t>(count) * sizeof(std::int64_t));
  auto* sorted = static_cast<std::int64_t*>(sorted_block.get());
  auto* positions = static_cast<std::int64_t*>(positions_block.get());
  auto* sorted_positions = static_cast<std::int64_t*>(sorted_positions_block.get());
  iota<<<grid_for(count), kBlockThreads, 0, stream>>>(count, positions);
  SUBLET_CUDA_LAUNCH_CHECK(embedding_iota);
  const int end_bit = bits_for(s.num_embeddings);
  std::size_t temp_bytes = 0;
  SUBLET_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, ids, sorted, positions, sorted_positions,
                                                    count, 0, end_bit, stream));
  auto temp = ctx.workspace(temp_bytes);
  SUBLET_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, ids, sorted, positions, sorted_positions,
                                                    count, 0, end_bit, stream));
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>((s.dim + kThreads - 1) / kThreads));
  sum_sorted_runs<T><<<grid, kThreads, 0, stream>>>(count, s.dim, s.num_embeddings, sorted, sorted_positions, grad,
                                                     table);
  SUBLET_CUDA_LAUNCH_CHECK(embedding_sum_sorted_runs);
}

}  // namespace

void embedding_forward(const Context& ctx, const EmbeddingShape& s, DType dtype, const void* weight,
                       const std::int64_t* indices, void* output) {
  check_in_range(ctx, indices, Shape{s.count}, Shape{1}, s.num_embeddings, std::nullopt,
                 [rows = s.num_embeddings](const OutOfRange& bad) {
                   throw_embedding_index_error(bad.position, bad.value, rows);
                 });
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_floating(dtype, "embedding", [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t numel = s.count * s.dim;
    gather_rows<T><<<grid_for(numel), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        numel, s.dim, s.num_embeddings, static_cast<const T*>(weight), indices, static_cast<T*>(output));
    SUBLET_CUDA_LAUNCH_CHECK(embedding_gather_rows);
  });
}

void embedding_backward(const Context& ctx, const EmbeddingShape& s, DType dtype, const void* grad_output,
                        const std::int64_t* indices, bool deterministic, void* grad_weight) {
  memory::CudaDeviceGuard device(ctx.device);
  const cudaStream_t stream = stream_of(ctx.stream);
  dispatch_device_floating(dtype, "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    SUBLET_CUDA_CHECK(cudaMemsetAsync(grad_weight, 0, static_cast<std::size_t>(s.num_embeddings * s.dim) * sizeof(T),
                                      stream));  // all-zero bits are +0 in every float type
    if (s.count == 0) return;
    const auto* grad = static_cast<const T*>(grad_output);
    auto* table = static_cast<T*>(grad_weight);
    if (deterministic || kIsHalf<T>) {
      backward_sorted<T>(ctx, s, grad, indices, table, stream);
    } else if constexpr (!kIsHalf<T>) {
      const std::int64_t numel = s.count * s.dim;
      scatter_add_rows<T><<<grid_for(numel), kBlockThreads, 0, stream>>>(numel, s.dim, s.num_embeddings, grad, indices,
                                                                         table);
      SUBLET_CUDA_LAUNCH_CHECK(embedding_scatter_add_rows);
    }
  });
}

}  // namespace sublet::ops::cuda
