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

#include "core/errors.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/conv_gemm.h"
#include "ops/cuda/cuda_checks.h"
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

constexpr const char* kWhat = "conv2d single-tap GEMM";

// C = op(A) op(B), column-major. No workspace: these products are small, and a second stream
// holds its workspaces until the join (ops/concurrent.h), where cuBLAS's usual 32 MiB would add
// to the step's peak.
void gemm(const Context& ctx, DType dtype, cublasOperation_t op_a, cublasOperation_t op_b, std::int64_t m,
          std::int64_t n, std::int64_t k, const void* a, std::int64_t lda, const void* b, std::int64_t ldb, void* c,
          std::int64_t ldc, float beta = 0.0f) {
  conv_gemm(ctx, dtype, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c, ldc, dtype, 0, kWhat);
}

const char* offset(const void* base, std::int64_t elements, DType dtype) {
  return static_cast<const char*>(base) + elements * static_cast<std::int64_t>(conv_gemm_element_bytes(dtype, kWhat));
}

void zero(const Context& ctx, void* data, std::int64_t elements, DType dtype) {
  SUBLET_CUDA_CHECK(cudaMemsetAsync(data, 0, static_cast<std::size_t>(elements) * conv_gemm_element_bytes(dtype, kWhat),
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
                                      const void* weight, void* grad_input, bool accumulate) {
  memory::CudaDeviceGuard device(ctx.device);
  const Tap tap = the_tap(s);
  const std::int64_t C = s.in_channels, K = s.out_channels, N = s.batch;
  const std::int64_t pixels = s.in_height * s.in_width;
  const std::int64_t x_ld = pixels * C, w_ld = s.kernel_h * s.kernel_w * C;
  if (pixels > 1 && !accumulate) zero(ctx, grad_input, s.input_numel(), dtype);  // pixels the tap never reads
  // dX^T [C, N] (+)= Wt^T [C, K] . dY^T [K, N]
  gemm(ctx, dtype, CUBLAS_OP_N, CUBLAS_OP_N, C, N, K, offset(weight, tap.index * C, dtype), w_ld, grad_output, K,
       const_cast<char*>(offset(grad_input, tap.pixel * C, dtype)), x_ld, accumulate ? 1.0f : 0.0f);
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
