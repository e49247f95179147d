// Row-major batched GEMM on cuBLAS (column-major) by the transpose trick: a row-major C[m, n]
// is the column-major C^T[n, m] = B^T A^T, so cuBLAS computes with the operands swapped.
// A row-major operand is, read column-major, already its transpose (op N); a column-major one
// (a transposed view) is read with op T. Batch strides pass straight through, 0 included
// (one matrix broadcast over the batch).
// bfloat16 and float16: cublasGemmStridedBatchedEx with 16-bit A, B and C, float32 accumulation
// (CUBLAS_COMPUTE_32F) and float alpha/beta, as PyTorch's bf16/fp16 GEMMs; the same operand
// layouts and batch slicing as float32. The handle's workspace is the lease's, from
// ctx.workspace() (ops/cuda/handles.h), so it shows in the allocator statistics.
#include "ops/cuda/matmul_cuda.h"

#include <algorithm>
#include <climits>
#include <string>

#include "core/errors.h"
#include "ops/cpu/dtype_dispatch.h"
#include "ops/cuda/cuda_checks.h"
#include "memory/cuda_device_guard.h"
#include "ops/cuda/stream.h"
#include "ops/cuda/handles.h"

namespace sublet::ops::cuda {
namespace {

// How cuBLAS reads one operand [rows, cols] of the row-major product.
struct CublasOperand {
  cublasOperation_t op = CUBLAS_OP_N;
  int ld = 1;
};

int to_int(std::int64_t value, const char* what) {
  if (value < 0 || value > INT_MAX) {
    throw ShapeError(std::string("matmul: ") + what + " " + std::to_string(value) +
                     " does not fit cuBLAS's 32-bit int");
  }
  return static_cast<int>(value);
}

// The same layout choice as the CPU kernel (ops/cpu/matmul_cpu.cpp, layout_of).
CublasOperand operand(std::int64_t rows, std::int64_t cols, std::int64_t row_stride, std::int64_t col_stride) {
  if (cols == 1 || col_stride == 1) {  // row-major: column-major storage of the [cols, rows] transpose
    const std::int64_t ld = rows == 1 ? cols : std::max(row_stride, cols);
    return {CUBLAS_OP_N, to_int(std::max<std::int64_t>(ld, 1), "leading dimension")};
  }
  const std::int64_t ld = cols == 1 ? rows : std::max(col_stride, rows);  // column-major [rows, cols]
  return {CUBLAS_OP_T, to_int(std::max<std::int64_t>(ld, 1), "leading dimension")};
}

template <typename T>
cublasStatus_t gemm_strided_batched(cublasHandle_t handle, cublasOperation_t op_b, cublasOperation_t op_a, int n, int m,
                                    int k, const T* alpha, const T* b, int ldb, long long stride_b, const T* a,
                                    int lda, long long stride_a, const T* beta, T* c, int ldc, long long stride_c,
                                    int batch) {
  if constexpr (std::is_same_v<T, float>) {
    return cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, alpha, b, ldb, stride_b, a, lda, stride_a, beta, c,
                                     ldc, stride_c, batch);
  } else {
    return cublasDgemmStridedBatched(handle, op_b, op_a, n, m, k, alpha, b, ldb, stride_b, a, lda, stride_a, beta, c,
                                     ldc, stride_c, batch);
  }
}

template <typename T>
void matmul_typed(const Context& ctx, const MatmulGeometry& g, T* out, const T* a, const T* b) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;
  memory::CudaDeviceGuard device(ctx.device);
  if (g.k == 0) {  // an empty sum: zeros, as the CPU kernel writes
    SUBLET_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(g.batch * g.m * g.n) * sizeof(T),
                                      stream_of(ctx.stream)));
    return;
  }
  const int m = to_int(g.m, "m"), n = to_int(g.n, "n"), k = to_int(g.k, "k");
  const CublasOperand op_a = operand(g.m, g.k, g.a_row_stride, g.a_col_stride);
  const CublasOperand op_b = operand(g.k, g.n, g.b_row_stride, g.b_col_stride);
  const T alpha = 1, beta = 0;
  CublasLease cublas = cublas_for(ctx);
  // cuBLAS counts batches in int: very large batches go in slices.
  for (std::int64_t first = 0; first < g.batch; first += INT_MAX) {
    const int count = static_cast<int>(std::min<std::int64_t>(g.batch - first, INT_MAX));
    SUBLET_CUBLAS_CHECK(gemm_strided_batched<T>(
        cublas.handle, op_b.op, op_a.op, n, m, k, &alpha, b + first * g.b_batch_stride, op_b.ld, g.b_batch_stride,
        a + first * g.a_batch_stride, op_a.ld, g.a_batch_stride, &beta, out + first * g.m * g.n, n, g.m * g.n, count));
  }
}

std::string geometry_text(DType dtype, const MatmulGeometry& g) {
  return std::string("matmul (") + dtype_name(dtype) + ", batch " + std::to_string(g.batch) + ", m " +
         std::to_string(g.m) + ", k " + std::to_string(g.k) + ", n " + std::to_string(g.n) + ", a strides [" +
         std::to_string(g.a_batch_stride) + ", " + std::to_string(g.a_row_stride) + ", " +
         std::to_string(g.a_col_stride) + "], b strides [" + std::to_string(g.b_batch_stride) + ", " +
         std::to_string(g.b_row_stride) + ", " + std::to_string(g.b_col_stride) + "])";
}

void matmul_half(const Context& ctx, DType dtype, const MatmulGeometry& g, void* out, const void* a, const void* b) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;
  constexpr std::int64_t kBytes = 2;  // both 16-bit types
  memory::CudaDeviceGuard device(ctx.device);
  if (g.k == 0) {  // an empty sum: zeros (all-zero bits are +0 in both types)
    SUBLET_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(g.batch * g.m * g.n * kBytes),
                                      stream_of(ctx.stream)));
    return;
  }
  const cudaDataType type = dtype == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_16F;
  const int m = to_int(g.m, "m"), n = to_int(g.n, "n"), k = to_int(g.k, "k");
  const CublasOperand op_a = operand(g.m, g.k, g.a_row_stride, g.a_col_stride);
  const CublasOperand op_b = operand(g.k, g.n, g.b_row_stride, g.b_col_stride);
  const float alpha = 1.0f, beta = 0.0f;  // CUBLAS_COMPUTE_32F takes float scalars
  CublasLease cublas = cublas_for(ctx);
  // Without this flag cuBLAS may add split-K partial sums in the 16-bit output type (PyTorch's
  // default "reduced precision reduction"); with it every sum stays in float32, which is what
  // these kernels promise (and what the K = 4096 test checks).
  MathModeScope math(cublas.handle,
                     static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  const auto* a_bytes = static_cast<const char*>(a);
  const auto* b_bytes = static_cast<const char*>(b);
  auto* out_bytes = static_cast<char*>(out);
  for (std::int64_t first = 0; first < g.batch; first += INT_MAX) {
    const int count = static_cast<int>(std::min<std::int64_t>(g.batch - first, INT_MAX));
    const cublasStatus_t status = cublasGemmStridedBatchedEx(
        cublas.handle, op_b.op, op_a.op, n, m, k, &alpha, b_bytes + first * g.b_batch_stride * kBytes, type, op_b.ld,
        g.b_batch_stride, a_bytes + first * g.a_batch_stride * kBytes, type, op_a.ld, g.a_batch_stride, &beta,
        out_bytes + first * g.m * g.n * kBytes, type, n, g.m * g.n, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw CudaError("cublasGemmStridedBatchedEx failed for " + geometry_text(dtype, g) + ": " +
                      cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
    }
  }
}

}  // namespace

void matmul(const Context& ctx, DType dtype, const MatmulGeometry& geometry, void* out, const void* a, const void* b) {
  if (dtype == DType::BFloat16 || dtype == DType::Float16) {
    matmul_half(ctx, dtype, geometry, out, a, b);
    return;
  }
  cpu::dispatch_floating(dtype, "matmul", [&](auto tag) {
    using T = decltype(tag);
    matmul_typed<T>(ctx, geometry, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b));
  });
}

}  // namespace sublet::ops::cuda
