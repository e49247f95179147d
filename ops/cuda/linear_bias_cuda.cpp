// Row-major out[m, n] = x[m, k] w[n, k]^T + bias, read column-major, is out^T[n, m] = w x^T:
// cuBLASLt's D (n x m, ld n) = op_T(A) op_N(B) with A = w read as a column-major [k, n] (ld k)
// and B = x as a column-major [k, m] (ld k); CUBLASLT_EPILOGUE_BIAS adds a vector of D's row
// count (n), which is the bias.
// The float32 weight gradient grad_w[n, k] = grad_out[m, n]^T x[m, k], read column-major, is
// D (k x n, ld k) = op_N(A) op_T(B) with A = x as a column-major [k, m] (ld k) and B = grad_out as
// a column-major [n, m] (ld n); D and C are float32. BGRADB sums op(B) over the GEMM's inner
// dimension (the m rows) into a vector of D's column count (n): the bias gradient.
// Algorithm choice, workspace and refusals: ops/cuda/cublaslt_gemm.h.
#include "ops/cuda/linear_bias_cuda.h"

#include <string>

#include "ops/cuda/cublaslt_gemm.h"

namespace sublet::ops::cuda {
namespace {

// Tells linear_bias's problems apart from the other cuBLASLt ops' in the shared plan cache.
constexpr std::int64_t kLinearBiasTag = 1;
constexpr std::int64_t kWeightGradFloat32Tag = 4;

std::string geometry_text(DType dtype, const LinearBiasGeometry& g) {
  return std::string("linear_bias (") + dtype_name(dtype) + ", m " + std::to_string(g.m) + ", k " +
         std::to_string(g.k) + ", n " + std::to_string(g.n) + ")";
}

}  // namespace

bool linear_bias(const Context& ctx, DType dtype, const LinearBiasGeometry& g, void* out, const void* x,
                 const void* w, const void* bias) {
  if (g.m == 0 || g.n == 0) return true;  // nothing to write
  if (g.k == 0) return false;             // an empty product: the fallback writes the broadcast bias
  const cudaDataType type = lt_data_type("linear_bias", dtype);
  // The epilogue reads the bias with vector loads; a bias at an odd offset goes the unfused way.
  if (pointer_alignment(bias) < 16) return false;

  LtMatmulDesc desc(dtype);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
  const LtLayout a(type, g.k, g.n, g.k), b(type, g.k, g.m, g.k), d(type, g.n, g.m, g.n);
  return lt_matmul(ctx, dtype, {kLinearBiasTag, g.m, g.k, g.n}, LtProblem{desc, a, w, b, x, d, out},
                   geometry_text(dtype, g));
}

bool linear_weight_grad_float32(const Context& ctx, DType dtype, const LinearBiasGeometry& g, float* grad_w,
                                float* grad_bias, const void* grad_out, const void* x) {
  if (g.n == 0) return true;  // nothing to write
  // No rows or an empty product: zeros or the bias gradient alone, which the fallback writes.
  if (g.m == 0 || g.k == 0) return false;
  // The epilogue writes the bias gradient with vector stores.
  if (grad_bias != nullptr && pointer_alignment(grad_bias) < 16) return false;
  const cudaDataType type = lt_data_type("linear_weight_grad_float32", dtype);

  LtMatmulDesc desc(dtype);  // float32 compute and scale for the 16-bit types
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_T);
  if (grad_bias != nullptr) {
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BGRADB);
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(grad_bias));
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
  }
  const LtLayout a(type, g.k, g.m, g.k), b(type, g.n, g.m, g.n), d(CUDA_R_32F, g.k, g.n, g.k);
  const std::vector<std::int64_t> key{kWeightGradFloat32Tag, g.m, g.k, g.n,
                                      grad_bias != nullptr ? pointer_alignment(grad_bias) : 0};
  return lt_matmul(ctx, dtype, key, LtProblem{desc, a, x, b, grad_out, d, grad_w},
                   std::string("linear_weight_grad_float32 (") + dtype_name(dtype) + ", m " + std::to_string(g.m) +
                       ", k " + std::to_string(g.k) + ", n " + std::to_string(g.n) + ")");
}

}  // namespace sublet::ops::cuda
