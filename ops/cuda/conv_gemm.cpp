#include "ops/cuda/conv_gemm.h"

#include <climits>
#include <string>

#include "core/errors.h"
#include "ops/conv_settings.h"
#include "ops/cuda/cuda_checks.h"
#include "ops/cuda/handles.h"

namespace sublet::ops::cuda {
namespace {

struct GemmTypes {
  cudaDataType type;
  cublasComputeType_t compute;
};

GemmTypes gemm_types(DType dtype, const char* what) {
  switch (dtype) {
    case DType::Float32:
      return {CUDA_R_32F, conv_algorithm_settings().allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::BFloat16:
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case DType::Float16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    default:
      throw DTypeError(std::string(what) + ": float32, bfloat16 or float16 expected, got " + dtype_name(dtype));
  }
}

int as_int(std::int64_t value, const char* what) {
  if (value > INT_MAX) {
    throw ShapeError(std::string(what) + ": a GEMM size of " + std::to_string(value) + " exceeds cuBLAS's int");
  }
  return static_cast<int>(value);
}

}  // namespace

std::size_t conv_gemm_element_bytes(DType dtype, const char* what) {
  gemm_types(dtype, what);  // throws for the dtypes these GEMMs do not take
  return element_size(dtype);
}

void conv_gemm(const Context& ctx, DType dtype, cublasOperation_t op_a, cublasOperation_t op_b, std::int64_t m,
               std::int64_t n, std::int64_t k, const void* a, std::int64_t lda, const void* b, std::int64_t ldb,
               float beta, void* c, std::int64_t ldc, DType c_dtype, std::size_t workspace_bytes, const char* what) {
  conv_gemm_strided_batched(ctx, dtype, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c, ldc, c_dtype, GemmBatch{},
                            workspace_bytes, what);
}

void conv_gemm_strided_batched(const Context& ctx, DType dtype, cublasOperation_t op_a, cublasOperation_t op_b,
                               std::int64_t m, std::int64_t n, std::int64_t k, const void* a, std::int64_t lda,
                               const void* b, std::int64_t ldb, float beta, void* c, std::int64_t ldc,
                               DType c_dtype, const GemmBatch& batch, std::size_t workspace_bytes, const char* what) {
  const GemmTypes g = gemm_types(dtype, what);
  if (c_dtype != dtype && c_dtype != DType::Float32) {
    throw DTypeError(std::string(what) + ": the GEMM's output must be " + dtype_name(dtype) + " or float32, got " +
                     dtype_name(c_dtype));
  }
  if (batch.count < 1) {
    throw ShapeError(std::string(what) + ": a batched GEMM needs at least one product, got " +
                     std::to_string(batch.count));
  }
  const cudaDataType c_type = c_dtype == dtype ? g.type : CUDA_R_32F;
  const float alpha = 1.0f;
  CublasLease cublas = cublas_for(ctx, workspace_bytes);
  MathModeScope math(cublas.handle,
                     static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  // The strided-batched form is the GEMM entry point ops/cuda/cublas_loader.cpp forwards (cuBLAS
  // is opened on first use); a single product is a batch of one with strides 0.
  SUBLET_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas.handle, op_a, op_b, as_int(m, what), as_int(n, what), as_int(k, what), &alpha, a, g.type,
      as_int(lda, what), batch.stride_a, b, g.type, as_int(ldb, what), batch.stride_b, &beta, c, c_type,
      as_int(ldc, what), batch.stride_c, as_int(batch.count, what), g.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace sublet::ops::cuda
