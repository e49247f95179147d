// The column sum (ops/cuda/reduce_columns.h): each thread of a block's 32 x 8 grid reads V
// consecutive columns of every 8th row of its block's run with one 16-byte load (a warp reads
// 512 contiguous bytes of a row), adds them in the accumulator type, and the 8 row lanes are
// combined in a fixed order through shared memory. With one run that is the output; with more,
// each run writes its partials and column_finish adds them in run order, so the bits depend on
// the geometry only.
#include <algorithm>

#include "memory/cuda_device_guard.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/reduce_columns.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/sum_accumulator.cuh"
#include "ops/cuda/vector_pack.cuh"

namespace sublet::ops::cuda {
namespace {

template <typename T, int V>
__global__ void __launch_bounds__(kColumnLanes* kRowLanes)
    column_partials(std::int64_t rows, std::int64_t cols, std::int64_t row_stride, std::int64_t rows_per_split,
                    const T* in, Accumulator<T>* partial, T* out, double scale) {
  using Acc = Accumulator<T>;
  __shared__ Acc scratch[kRowLanes][kColumnLanes * V];
  const std::int64_t col = (static_cast<std::int64_t>(blockIdx.x) * kColumnLanes + threadIdx.x) * V;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * rows_per_split;
  const std::int64_t end = std::min(rows, begin + rows_per_split);
  Acc acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = 0;
  if (col < cols) {  // cols is a multiple of V: a pack is all in or all out
    for (std::int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) {
      const Pack<T, V> x = load_pack<T, V>(in, r * row_stride + col);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] += static_cast<Acc>(load_compute(x.v[j]));
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) scratch[threadIdx.y][threadIdx.x * V + j] = acc[j];
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    Acc sum = scratch[0][threadIdx.x * V + j];
#pragma unroll
    for (int y = 1; y < kRowLanes; ++y) sum += scratch[y][threadIdx.x * V + j];
    if (gridDim.y == 1) {
      out[col + j] = finish_sum<T>(sum, scale);
    } else {
      partial[static_cast<std::int64_t>(blockIdx.y) * cols + col + j] = sum;
    }
  }
}

template <typename T>
__global__ void column_finish(std::int64_t splits, std::int64_t cols, const Accumulator<T>* partial, T* out,
                              double scale) {
  for (std::int64_t c = global_thread_index(); c < cols; c += grid_threads()) {
    Accumulator<T> sum = 0;
    for (std::int64_t s = 0; s < splits; ++s) sum += partial[s * cols + c];
    out[c] = finish_sum<T>(sum, scale);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <typename T, int V>
void launch_columns(const Context& ctx, const ColumnPlan& plan, T* out, const T* in, double scale) {
  const ColumnLaunch launch = column_launch(plan.rows, plan.cols, V);
  memory::ScopedBlock partial;
  if (launch.splits > 1) {
    partial = ctx.workspace(static_cast<std::size_t>(launch.splits * plan.cols) * sizeof(Accumulator<T>));
  }
  auto* partial_ptr = static_cast<Accumulator<T>*>(partial.get());
  const cudaStream_t stream = stream_of(ctx.stream);
  const dim3 grid(static_cast<unsigned>(launch.column_blocks), static_cast<unsigned>(launch.splits));
  const dim3 block(kColumnLanes, kRowLanes);
  column_partials<T, V><<<grid, block, 0, stream>>>(plan.rows, plan.cols, plan.row_stride, launch.rows_per_split, in,
                                                    partial_ptr, out, scale);
  SUBLET_CUDA_LAUNCH_CHECK(column_partials);
  if (launch.splits > 1) {
    column_finish<T><<<grid_for(plan.cols), kBlockThreads, 0, stream>>>(launch.splits, plan.cols, partial_ptr, out,
                                                                        scale);
    SUBLET_CUDA_LAUNCH_CHECK(column_finish);
  }
}

}  // namespace

void sum_columns(const Context& ctx, DType dtype, const ColumnPlan& plan, void* out, const void* in, double scale) {
  memory::CudaDeviceGuard device(ctx.device);
  dispatch_device_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kWidth = static_cast<int>(16 / sizeof(T));
    auto* o = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(in);
    // One 16-byte load per thread and row when every row starts on a 16-byte boundary.
    const bool vector = kWidth > 1 && plan.cols % kWidth == 0 && aligned16(in) &&
                        (plan.row_stride * static_cast<std::int64_t>(sizeof(T))) % 16 == 0;
    if (vector) {
      launch_columns<T, kWidth>(ctx, plan, o, x, scale);
    } else {
      launch_columns<T, 1>(ctx, plan, o, x, scale);
    }
  });
}

}  // namespace sublet::ops::cuda
