#pragma once
// The cuBLAS GEMM that convolutions written as matrix products share (ops/cuda/conv2d_single_tap.h,
// ops/cuda/conv2d_im2col.h): column-major C = alpha op(A) op(B) + beta C with float32
// accumulation, float32 inputs as TF32 when conv_algorithm_settings().allow_tf32 (as cuDNN's
// convolutions), bfloat16/float16 with every sum in float32 (no 16-bit split-K reduction).
// A row-major [rows, cols] matrix with row stride ld is cuBLAS's column-major transpose with
// leading dimension ld.
#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>

#include "core/dtype.h"
#include "ops/context.h"

namespace sublet::ops::cuda {

// Bytes of one element of a dtype these GEMMs take; throws DTypeError naming `what` otherwise.
std::size_t conv_gemm_element_bytes(DType dtype, const char* what);

// A and B hold `dtype`; C holds c_dtype: `dtype`, or float32 (sums kept in float32, e.g. a
// weight gradient accumulated over chunks). beta is 0 or 1 (accumulate into C). workspace_bytes: cuBLAS's workspace for this call (0:
// none; it then picks kernels that need none, e.g. no split-K). Call with ctx.device current.
void conv_gemm(const Context& ctx, DType dtype, cublasOperation_t op_a, cublasOperation_t op_b, std::int64_t m,
               std::int64_t n, std::int64_t k, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
               float beta, void* c, std::int64_t ldc, DType c_dtype, std::size_t workspace_bytes, const char* what);

// `batch` such products at once: product i reads a + i * stride_a and b + i * stride_b and
// writes c + i * stride_c (strides in elements of each matrix's type). E.g. a split-K: slices of
// a long k, each into its own partial product, summed by the caller.
struct GemmBatch {
  std::int64_t count = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};
void conv_gemm_strided_batched(const Context& ctx, DType dtype, cublasOperation_t op_a, cublasOperation_t op_b,
                               std::int64_t m, std::int64_t n, std::int64_t k, const void* a, std::int64_t lda,
                               const void* b, std::int64_t ldb, float beta, void* c, std::int64_t ldc,
                               DType c_dtype, const GemmBatch& batch, std::size_t workspace_bytes, const char* what);

}  // namespace sublet::ops::cuda
