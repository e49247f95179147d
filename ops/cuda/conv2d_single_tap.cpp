// The single-tap convolutions of ops/cuda/conv2d_single_tap.h as GEMMs.
//
// The one output pixel (0, 0) reads input pixel (r * dh - ph, s * dw - pw) through tap (r, s);
// exactly one tap lands inside the input. With channels-last buffers:
//   X  [N, C]  row n at n * H * W * C + pixel * C   (the one pixel the tap reads)
//   Y  [N, K]  row n at n * K                       (one output pixel)
//   Wt [K, C]  row k at k * KH * KW * C + tap * C   (the tap's weights, [K, KH, KW, C] dense)
// and Y = X Wt^T, dX(pixel) = dY Wt, dWt = dY^T X. cuBLAS is column-major: a row-major [rows,
// cols] matrix with row stride ld is its column-major transpose with leading dimension ld.
#include "ops/cuda/conv2d_single_tap.h"

#include <climits>
#include <string>

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/conv_settings.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/handles.h"
#include "ops/cuda/stream.h"

namespace sublet::ops::cuda {
namespace {

struct Tap {
  std::int64_t pixel;  // ih * W + iw: the input pixel it reads
  std::int64_t index;  // r * KW + s
};

// The taps of output pixel (0, 0) that land inside the input: how many, and the last one found.
int taps_inside(const Conv2dShape& s, Tap& tap) {
  int count = 0;
  for (std::int64_t r = 0; r < s.kernel_h; ++r) {
    const std::int64_t ih = r * s.dilation_h - s.pad_h;
    if (ih < 0 || ih >= s.in_height) continue;
    for (std::int64_t c = 0; c < s.kernel_w; ++c) {
      const std::int64_t iw = c * s.dilation_w - s.pad_w;
      if (iw < 0 || iw >= s.in_width) continue;
      ++count;
      tap = {ih * s.in_width + iw, r * s.kernel_w + c};
    }
  }
  return count;
}

struct Gemm {
  cudaDataType type;
  cublasComputeType_t compute;
  std::size_t element_bytes;
};

Gemm gemm_for(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return {CUDA_R_32F,
              conv_algorithm_settings().allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, 4};
    case DType::BFloat16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2};
    case DType::Float16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F, 2};
    default:
      throw DTypeError(std::string("conv2d single-tap GEMM: float32, bfloat16 or float16 expected, got ") +
                       dtype_name(dtype));
  }
}

int as_int(std::int64_t value) {
  if (value > INT_MAX) throw ShapeError("conv2d single-tap GEMM: a size of " + std::to_string(value) + " exceeds cuBLAS's int");
  return static_cast<int>(value);
}

// C = op(A) op(B), column-major, float32 accumulation; every sum in float32 (no 16-bit split-K).
void gemm(const Context& ctx, DType dtype, cublasOperation_t op_a, cublasOperation_t op_b, std::int64_t m,
          std::int64_t n, std::int64_t k, const void* a, std::int64_t lda, const void* b, std::int64_t ldb, void* c,
          std::int64_t ldc) {
  const Gemm g = gemm_for(dtype);
  const float alpha = 1.0f, beta = 0.0f;
  // No workspace: these products are small, and a second stream holds its workspaces until the
  // join (ops/concurrent.h), where cuBLAS's usual 32 MiB would add to the step's peak.
  CublasLease cublas = cublas_for(ctx, 0);
  MathModeScope math(cublas.handle,
                     static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  SUBLET_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas.handle, op_a, op_b, as_int(m), as_int(n), as_int(k), &alpha, a,
                                                 g.type, as_int(lda), 0, b, g.type, as_int(ldb), 0, &beta, c, g.type,
                                                 as_int(ldc), 0, 1, g.compute, CUBLAS_GEMM_DEFAULT));
}

const char* offset(const void* base, std::int64_t elements, DType dtype) {
  return static_cast<const char*>(base) + elements * static_cast<std::int64_t>(gemm_for(dtype).element_bytes);
}

void zero(const Context& ctx, void* data, std::int64_t elements, DType dtype) {
  SUBLET_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<std::size_t>(elements) * gemm_for(dtype).element_bytes,
                                    stream_of(ctx.stream)));
}

Tap the_tap(const Conv2dShape& s) {
  Tap tap{};
  if (taps_inside(s, tap) != 1) throw ValueError("conv2d single-tap GEMM: the shape has more than one tap inside");
  return tap;
}

}  // namespace

bool conv2d_single_tap_applies(const Conv2dShape& s, DType dtype) {
  if (dtype != DType::Float32 && dtype != DType::BFloat16 && dtype != DType::Float16) return false;
  if (s.groups != 1 || s.out_height() != 1 || s.out_width() != 1) return false;
  const bool whole_plane_1x1 = s.in_height == 1 && s.in_width == 1 && s.kernel_h == 1 && s.kernel_w == 1;
  if (s.format != MemoryFormat::ChannelsLast && !whole_plane_1x1) return false;
  Tap tap{};
  return taps_inside(s, tap) == 1;
}

void conv2d_single_tap_forward(const Context& ctx, const Conv2dShape& s, DType dtype, const void* input,
                               const void* weight, void* output) {
  memory::CudaDeviceGuard device(ctx.device);
  const Tap tap = the_tap(s);
  const std::int64_t C = s.in_channels, K = s.out_channels, N = s.batch;
  const std::int64_t x_ld = s.in_height * s.in_width * C, w_ld = s.kernel_h * s.kernel_w * C;
  // Y^T [K, N] = Wt [K, C] . X^T [C, N]
  gemm(ctx, dtype, CUBLAS_OP_T, CUBLAS_OP_N, K, N, C, offset(weight, tap.index * C, dtype), w_ld,
       offset(input, tap.pixel * C, dtype), x_ld, output, K);
}

void conv2d_single_tap_backward_input(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                      const void* weight, void* grad_input) {
  memory::CudaDeviceGuard device(ctx.device);
  const Tap tap = the_tap(s);
  const std::int64_t C = s.in_channels, K = s.out_channels, N = s.batch;
  const std::int64_t pixels = s.in_height * s.in_width;
  const std::int64_t x_ld = pixels * C, w_ld = s.kernel_h * s.kernel_w * C;
  if (pixels > 1) zero(ctx, grad_input, s.input_numel(), dtype);  // pixels the tap never reads
  // dX^T [C, N] = Wt^T [C, K] . dY^T [K, N]
  gemm(ctx, dtype, CUBLAS_OP_N, CUBLAS_OP_N, C, N, K, offset(weight, tap.index * C, dtype), w_ld, grad_output, K,
       const_cast<char*>(offset(grad_input, tap.pixel * C, dtype)), x_ld);
}

void conv2d_single_tap_backward_weight(const Context& ctx, const Conv2dShape& s, DType dtype, const void* grad_output,
                                       const void* input, void* grad_weight) {
  memory::CudaDeviceGuard device(ctx.device);
  const Tap tap = the_tap(s);
  const std::int64_t C = s.in_channels, K = s.out_channels, N = s.batch;
  const std::int64_t x_ld = s.in_height * s.in_width * C, w_ld = s.kernel_h * s.kernel_w * C;
  if (s.kernel_h * s.kernel_w > 1) zero(ctx, grad_weight, s.weight_numel(), dtype);  // taps outside the input
  // dWt^T [C, K] = X^T [C, N] . dY [N, K]
  gemm(ctx, dtype, CUBLAS_OP_N, CUBLAS_OP_T, C, K, N, offset(input, tap.pixel * C, dtype), x_ld, grad_output, K,
       const_cast<char*>(offset(grad_weight, tap.index * C, dtype)), w_ld);
}

}  // namespace sublet::ops::cuda
