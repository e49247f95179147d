// The narrow-input convolutions of ops/cuda/conv2d_im2col.h: an im2col kernel and cuBLAS GEMMs.
//
// With channels-last buffers and the column matrix Col [rows, Kp] (rows = N*OH*OW, Kp = KH*KW*C
// rounded up to 8, zero columns past KH*KW*C) and the padded weight Wp [K, Kp]:
//   Y  [rows, K] = Col Wp^T       column-major: Y^T [K, rows]  = Wp^T' [K, Kp] . Col^T' [Kp, rows]
//   dWp [K, Kp]  = dY^T Col       column-major: dWp^T [Kp, K] = Col^T' [Kp, rows] . dY' [rows, K]
// (X' = the column-major view of row-major X). A chunk of rows is one im2col launch and one GEMM;
// the weight gradient sums its chunks in a float32 buffer and is rounded to the dtype once.
#include "ops/cuda/conv2d_im2col.h"

#include <algorithm>
#include <string>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/conv_gemm.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/half_types.cuh"
#include "ops/cuda/int_divider.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

constexpr const char* kWhat = "conv2d im2col GEMM";
constexpr std::int64_t kColumnAlignment = 8;  // values: 16-byte rows for 16-bit dtypes, 32 for float32
constexpr std::size_t kWeightGradientGemmWorkspace = std::size_t{4} << 20;  // split-K over the rows

std::int64_t round_up(std::int64_t value, std::int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// What the im2col kernel needs: the geometry, with dividers for the index decomposition.
struct Im2colGeometry {
  IntDivider padded_columns;  // Kp
  IntDivider channels;        // C
  IntDivider kernel_width;    // KW
  IntDivider plane;           // OH * OW
  IntDivider out_width;       // OW
  unsigned columns;           // KH * KW * C (the rest of Kp are zeros)
  int height, width, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
};

Im2colGeometry geometry_of(const Conv2dShape& s) {
  Im2colGeometry g;
  const std::int64_t columns = s.kernel_h * s.kernel_w * s.in_channels;
  g.padded_columns = IntDivider(round_up(columns, kColumnAlignment));
  g.channels = IntDivider(s.in_channels);
  g.kernel_width = IntDivider(s.kernel_w);
  g.plane = IntDivider(s.out_height() * s.out_width());
  g.out_width = IntDivider(s.out_width());
  g.columns = static_cast<unsigned>(columns);
  g.height = static_cast<int>(s.in_height), g.width = static_cast<int>(s.in_width);
  g.stride_h = static_cast<int>(s.stride_h), g.stride_w = static_cast<int>(s.stride_w);
  g.pad_h = static_cast<int>(s.pad_h), g.pad_w = static_cast<int>(s.pad_w);
  g.dilation_h = static_cast<int>(s.dilation_h), g.dilation_w = static_cast<int>(s.dilation_w);
  return g;
}

// Col[row, k] for rows [row_begin, row_begin + count / Kp): one value per thread.
template <typename T>
__global__ void im2col_channels_last(Im2colGeometry g, const T* __restrict__ input, unsigned row_begin,
                                     unsigned count, T* __restrict__ columns) {
  const unsigned index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= count) return;
  unsigned row, k;
  g.padded_columns.divmod(index, row, k);
  T value = store_compute<T>(0.0f);
  if (k < g.columns) {
    unsigned tap, c, r, s, image, pixel, oh, ow;
    g.channels.divmod(k, tap, c);
    g.kernel_width.divmod(tap, r, s);
    g.plane.divmod(row_begin + row, image, pixel);
    g.out_width.divmod(pixel, oh, ow);
    const int ih = static_cast<int>(oh) * g.stride_h - g.pad_h + static_cast<int>(r) * g.dilation_h;
    const int iw = static_cast<int>(ow) * g.stride_w - g.pad_w + static_cast<int>(s) * g.dilation_w;
    if (ih >= 0 && ih < g.height && iw >= 0 && iw < g.width) {
      const std::size_t at = ((static_cast<std::size_t>(image) * g.height + ih) * g.width + iw) * g.channels.divisor();
      value = input[at + c];
    }
  }
  columns[index] = value;
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

// dst [rows, columns] = src [rows, padded] without its padding, float32 sums rounded to T.
template <typename T>
__global__ void unpad_rows(const float* __restrict__ src, unsigned rows, unsigned columns, unsigned padded,
                           T* __restrict__ dst) {
  const unsigned index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= rows * columns) return;
  const unsigned row = index / columns, column = index - row * columns;
  dst[index] = store_compute<T>(src[row * padded + column]);
}

unsigned blocks_for(std::int64_t count) {
  return static_cast<unsigned>((count + kBlockThreads - 1) / kBlockThreads);
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
  const std::int64_t count = rows * g.padded_columns.divisor();
  im2col_channels_last<T><<<blocks_for(count), kBlockThreads, 0, stream_of(ctx.stream)>>>(
      g, static_cast<const T*>(input), static_cast<unsigned>(row_begin), static_cast<unsigned>(count),
      static_cast<T*>(columns));
  SUBLET_CUDA_CHECK(cudaGetLastError());
}

// Calls f(T{}) with T the device type of a dtype these GEMMs take.
template <typename F>
void by_dtype(DType dtype, F&& f) {
  conv_gemm_element_bytes(dtype, kWhat);  // throws for the others
  dispatch_device_floating(dtype, kWhat, static_cast<F&&>(f));
}

}  // namespace

bool conv2d_im2col_applies(const Conv2dShape& s, DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::BFloat16 && dtype != DType::Float16) return false;
  if (s.format != MemoryFormat::ChannelsLast || s.groups != 1 || s.in_channels >= 8) return false;
  if (s.kernel_h * s.kernel_w * s.in_channels < 16 || s.out_height() * s.out_width() <= 1) return false;
  // The kernel's 32-bit indices: output rows and input values below 2^31.
  return s.batch * s.out_height() * s.out_width() < kIntDividerLimit && s.input_numel() < kIntDividerLimit;
}

void conv2d_im2col_forward(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input,
                           const void* weight, void* output, std::size_t column_bytes) {
  memory::CudaDeviceGuard device(ctx.device);
  const Im2colGeometry g = geometry_of(s);
  const std::int64_t padded = g.padded_columns.divisor(), rows = s.batch * s.out_height() * s.out_width();
  const std::int64_t out_channels = s.out_channels;
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t chunk = chunk_rows(rows, padded, sizeof(T), column_bytes);
    memory::ScopedBlock padded_weight = ctx.workspace(static_cast<std::size_t>(out_channels * padded) * sizeof(T));
    memory::ScopedBlock columns = ctx.workspace(static_cast<std::size_t>(chunk * padded) * sizeof(T));
    pad_rows<T><<<blocks_for(out_channels * padded), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const T*>(weight), static_cast<unsigned>(out_channels), g.columns, static_cast<unsigned>(padded),
        static_cast<T*>(padded_weight.get()));
    SUBLET_CUDA_CHECK(cudaGetLastError());
    for (std::int64_t begin = 0; begin < rows; begin += chunk) {
      const std::int64_t count = std::min(chunk, rows - begin);
      launch_im2col<T>(ctx, g, input, begin, count, columns.get());
      conv_gemm(ctx, dtype, CUBLAS_OP_T, CUBLAS_OP_N, out_channels, count, padded, padded_weight.get(), padded,
                columns.get(), padded, 0.0f, static_cast<T*>(output) + begin * out_channels, out_channels, dtype, 0,
                kWhat);
    }
  });
}

void conv2d_im2col_backward_weight(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                   const void* input, void* grad_weight, std::size_t column_bytes) {
  memory::CudaDeviceGuard device(ctx.device);
  const Im2colGeometry g = geometry_of(s);
  const std::int64_t padded = g.padded_columns.divisor(), rows = s.batch * s.out_height() * s.out_width();
  const std::int64_t out_channels = s.out_channels;
  by_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t chunk = chunk_rows(rows, padded, sizeof(T), column_bytes);
    memory::ScopedBlock sums = ctx.workspace(static_cast<std::size_t>(out_channels * padded) * sizeof(float));
    memory::ScopedBlock columns = ctx.workspace(static_cast<std::size_t>(chunk * padded) * sizeof(T));
    for (std::int64_t begin = 0; begin < rows; begin += chunk) {
      const std::int64_t count = std::min(chunk, rows - begin);
      launch_im2col<T>(ctx, g, input, begin, count, columns.get());
      conv_gemm(ctx, dtype, CUBLAS_OP_N, CUBLAS_OP_T, padded, out_channels, count, columns.get(), padded,
                static_cast<const T*>(grad_output) + begin * out_channels, out_channels, begin == 0 ? 0.0f : 1.0f,
                sums.get(), padded, DType::Float32, kWeightGradientGemmWorkspace, kWhat);
    }
    unpad_rows<T><<<blocks_for(out_channels * g.columns), kBlockThreads, 0, stream_of(ctx.stream)>>>(
        static_cast<const float*>(sums.get()), static_cast<unsigned>(out_channels), g.columns,
        static_cast<unsigned>(padded), static_cast<T*>(grad_weight));
    SUBLET_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace sublet::ops::cuda
