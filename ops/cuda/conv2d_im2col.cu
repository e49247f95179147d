// The narrow-input convolutions of ops/cuda/conv2d_im2col.h: an im2col kernel and cuBLAS GEMMs.
//
// With channels-last buffers and the column matrix Col [rows, Kp] (rows = N*OH*OW, Kp = KH*KW*C
// rounded up to 8, zero columns past KH*KW*C) and the padded weight Wp [K, Kp]:
//   Y  [rows, K] = Col Wp^T       column-major: Y^T [K, rows]  = Wp^T' [K, Kp] . Col^T' [Kp, rows]
//   dWp [K, Kp]  = dY^T Col       column-major: dWp^T [Kp, K] = Col^T' [Kp, rows] . dY' [rows, K]
// (X' = the column-major view of row-major X). A chunk of rows is one im2col launch and, for the
// forward, one GEMM. The weight gradient splits each chunk's rows into slices
// (ops/cuda/split_k_plan.h): one strided-batched GEMM writes a float32 partial dWp per slice
// (and one more GEMM the rows left over), then one kernel sums the partials in a fixed order,
// adds the earlier chunks' float32 sum and writes grad_weight without the padding columns,
// rounded to the dtype once (after the last chunk).
#include "ops/cuda/conv2d_im2col.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/conv_gemm.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/im2col_row.h"
#include "ops/cuda/int_divider.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/split_k_plan.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

constexpr const char* kWhat = "conv2d im2col GEMM";
constexpr unsigned kRowsPerBlock = kBlockThreads / kIm2colLanes;  // im2col: one warp per column row
constexpr unsigned kSumGroups = 8;  // threads that share the sum of one weight-gradient value

// Col[local, k] for the rows [row_begin, row_begin + rows): warp w of the grid writes row w.
template <typename T>
__global__ void im2col_channels_last(Im2colGeometry g, const T* __restrict__ input, unsigned row_begin,
                                     unsigned rows, T* __restrict__ columns) {
  const unsigned local = blockIdx.x * kRowsPerBlock + threadIdx.x / kIm2colLanes;
  if (local >= rows) return;
  im2col_row(g, input, row_begin + local, threadIdx.x % kIm2colLanes, store_compute<T>(0.0f),
             columns + local * g.padded_columns);
}

// dst [rows, padded] = src [rows, columns] and zeros (the weight into the column layout).
template <typename T>
__global__ void pad_rows(const T* __restrict__ src, unsigned rows, unsigned columns, unsigned padded,
                         T* __restrict__ dst) {
  const unsigned index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= rows * padded) return;
  const unsigned row = index / padded, column = index - row * padded;
  dst[index] = column < columns ? src[row * columns + column] : store_compute<T>(0.0f);
}

// Value v = (o, col) of the weight gradient [K, columns]: the `count` float32 partials
// [count][K, Kp] summed, plus carried[v] (the earlier chunks' sum) when carried is set; written
// to carry_out[v] (float32, for the next chunk; may be `carried`) when set, else rounded to T
// into dst[v]. Block (32, kSumGroups): thread (x, y) sums the partials y, y + kSumGroups, ... of
// value x in that order, then thread (x, 0) adds the kSumGroups sums in order: the same order on
// every run, so the result is bit-identical across runs (no atomics).
template <typename T>
__global__ void sum_partials(const float* __restrict__ partials, unsigned count, std::size_t partial_stride,
                             unsigned values, unsigned columns, unsigned padded, const float* carried,
                             float* carry_out, T* __restrict__ dst) {
  __shared__ float group_sums[kSumGroups][kIm2colLanes];
  const unsigned value = blockIdx.x * kIm2colLanes + threadIdx.x;
  const bool inside = value < values;
  float sum = 0.0f;
  if (inside) {
    const unsigned o = value / columns;
    const float* at = partials + (o * padded + (value - o * columns));
#pragma unroll 4
    for (unsigned p = threadIdx.y; p < count; p += kSumGroups) sum += at[p * partial_stride];
  }
  group_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || !inside) return;
  float total = carried != nullptr ? carried[value] : 0.0f;
  for (unsigned group = 0; group < kSumGroups; ++group) total += group_sums[group][threadIdx.x];
  if (carry_out != nullptr) {
    carry_out[value] = total;
  } else {
    dst[value] = store_compute<T>(total);
  }
}

unsigned blocks_for(std::int64_t count, std::int64_t per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

// The rows of one chunk: as many as `column_bytes` holds, at least one, and few enough that a
// chunk's values stay below 2^31 (the kernel's 32-bit indices).
std::int64_t chunk_rows(std::int64_t rows, std::int64_t padded_columns, std::size_t element_bytes,
                        std::size_t column_bytes) {
  const std::int64_t by_bytes = static_cast<std::int64_t>(column_bytes / (padded_columns * element_bytes));
  const std::int64_t by_index = (kIntDividerLimit - 1) / padded_columns;
  return std::clamp<std::int64_t>(std::min(by_bytes, by_index), 1, rows);
}

template <typename T>
void launch_im2col(const Context& ctx, const Im2colGeometry& g, const void* input, std::int64_t row_begin,
                   std::int64_t rows, void* columns) {
  im2col_channels_last<T><<<blocks_for(rows, kRowsPerBlock), kBlockThreads, 0, stream_of(ctx.stream)>>>(
      g, static_cast<const T*>(input), static_cast<unsigned>(row_begin), static_cast<unsigned>(rows),
      static_cast<T*>(columns));
  SUBLET_CUDA_CHECK(cudaGetLastError());
}

// Calls f(T{}) with T the device type of a dtype these GEMMs take.
template <typename F>
void by_dtype(DType dtype, F&& f) {
  conv_gemm_element_bytes(dtype, kWhat);  // throws for the others
  dispatch_device_floating(dtype, kWhat, static_cast<F&&>(f));
}

// The sizes both passes start from.
struct Im2colSizes {
  Im2colGeometry geometry;
  std::int64_t padded;        // Kp
  std::int64_t rows;          // N * OH * OW
  std::int64_t columns;       // KH * KW * C
  std::int64_t out_channels;  // K
};

Im2colSizes im2col_sizes(const Conv2dShape& s) {
  const Im2colGeometry g = im2col_geometry(s);
  return {g, g.padded_columns, s.batch * s.out_height() * s.out_width(), s.kernel_h * s.kernel_w * s.in_channels,
          s.out_channels};
}

}  // namespace

bool conv2d_im2col_applies(const Conv2dShape& s, DType dtype) {
  if (dtype != DType::Float32) return false;  // 16-bit stems stay with cuDNN (ops/cuda/conv2d_im2col.h)
  if (s.format != MemoryFormat::ChannelsLast || s.groups != 1 || s.in_channels >= 8) return false;
  if (s.kernel_h * s.kernel_w * s.in_channels < 16 || s.out_height() * s.out_width() <= 1) return false;
  // The kernels' 32-bit indices: output rows, input values and padded weight values below 2^31.
  return s.batch * s.out_height() * s.out_width() < kIntDividerLimit && s.input_numel() < kIntDividerLimit &&
         s.out_channels * im2col_padded_columns(s) < kIntDividerLimit;
}

void conv2d_im2col_forward(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input,
                           const void* weight, void* output, std::size_t column_bytes) {
  memory::CudaDeviceGuard device(ctx.device);
  const Im2colSizes z = im2col_sizes(s);
  const Im2colGeometry& g = z.geometry;
  const std::int64_t padded = z.padded, rows = z.rows, columns = z.columns, out_channels = z.out_channels;
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t chunk = chunk_rows(rows, padded, sizeof(T), column_bytes);
    memory::ScopedBlock padded_weight = ctx.workspace(static_cast<std::size_t>(out_channels * padded) * sizeof(T));
    memory::ScopedBlock column_block = ctx.workspace(static_cast<std::size_t>(chunk * padded) * sizeof(T));
    pad_rows<T><<<blocks_for(out_channels * padded, kBlockThreads), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const T*>(weight), static_cast<unsigned>(out_channels), static_cast<unsigned>(columns),
        static_cast<unsigned>(padded), static_cast<T*>(padded_weight.get()));
    SUBLET_CUDA_CHECK(cudaGetLastError());
    for (std::int64_t begin = 0; begin < rows; begin += chunk) {
      const std::int64_t count = std::min(chunk, rows - begin);
      launch_im2col<T>(ctx, g, input, begin, count, column_block.get());
      conv_gemm(ctx, dtype, CUBLAS_OP_T, CUBLAS_OP_N, out_channels, count, padded, padded_weight.get(), padded,
                column_block.get(), padded, 0.0f, static_cast<T*>(output) + begin * out_channels, out_channels, dtype,
                0, kWhat);
    }
  });
}

void conv2d_im2col_backward_weight(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                   const void* input, void* grad_weight, std::size_t column_bytes) {
  memory::CudaDeviceGuard device(ctx.device);
  const Im2colSizes z = im2col_sizes(s);
  const Im2colGeometry& g = z.geometry;
  const std::int64_t padded = z.padded, rows = z.rows, columns = z.columns, out_channels = z.out_channels;
  const std::int64_t values = out_channels * columns;  // of grad_weight
  const std::size_t partial_bytes = static_cast<std::size_t>(out_channels * padded) * sizeof(float);
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t chunk = chunk_rows(rows, padded, sizeof(T), column_bytes);
    const std::int64_t chunks = (rows + chunk - 1) / chunk;
    // The last chunk may be shorter and still be split into more partials than a full one.
    const std::int64_t last_rows = rows - (chunks - 1) * chunk;
    const std::int64_t most_partials = std::max(plan_split_k(chunk, partial_bytes).partials(),
                                                plan_split_k(last_rows, partial_bytes).partials());
    memory::ScopedBlock partial_block = ctx.workspace(static_cast<std::size_t>(most_partials) * partial_bytes);
    memory::ScopedBlock column_block = ctx.workspace(static_cast<std::size_t>(chunk * padded) * sizeof(T));
    std::optional<memory::ScopedBlock> carried_block;  // the float32 sum over the chunks so far
    if (chunks > 1) carried_block.emplace(ctx.workspace(static_cast<std::size_t>(values) * sizeof(float)));
    const auto* columns_in = static_cast<const T*>(column_block.get());
    auto* partials = static_cast<float*>(partial_block.get());
    for (std::int64_t index = 0; index < chunks; ++index) {
      const std::int64_t begin = index * chunk, count = std::min(chunk, rows - begin);
      launch_im2col<T>(ctx, g, input, begin, count, column_block.get());
      const SplitK plan = plan_split_k(count, partial_bytes);
      const T* dy = static_cast<const T*>(grad_output) + begin * out_channels;
      // No cuBLAS workspace: the split is this one, and without one cuBLAS splits no further.
      if (plan.slices > 0) {
        const GemmBatch batch{plan.slices, plan.slice_rows * padded, plan.slice_rows * out_channels,
                              out_channels * padded};
        conv_gemm_strided_batched(ctx, dtype, CUBLAS_OP_N, CUBLAS_OP_T, padded, out_channels, plan.slice_rows,
                                  columns_in, padded, dy, out_channels, 0.0f, partials, padded, DType::Float32, batch,
                                  0, kWhat);
      }
      if (plan.tail_rows > 0) {
        const std::int64_t done = plan.slices * plan.slice_rows;
        conv_gemm(ctx, dtype, CUBLAS_OP_N, CUBLAS_OP_T, padded, out_channels, plan.tail_rows,
                  columns_in + done * padded, padded, dy + done * out_channels, out_channels, 0.0f,
                  partials + plan.slices * out_channels * padded, padded, DType::Float32, 0, kWhat);
      }
      float* carried = carried_block ? static_cast<float*>(carried_block->get()) : nullptr;
      const dim3 threads(kIm2colLanes, kSumGroups);
      sum_partials<T><<<blocks_for(values, kIm2colLanes), threads, 0, stream_of(ctx.stream)>>>(
          partials, static_cast<unsigned>(plan.partials()), static_cast<std::size_t>(out_channels * padded),
          static_cast<unsigned>(values), static_cast<unsigned>(columns), static_cast<unsigned>(padded),
          index == 0 ? nullptr : carried, index + 1 == chunks ? nullptr : carried, static_cast<T*>(grad_weight));
      SUBLET_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace sublet::ops::cuda
