// Row-major [m, n] results read column-major are cuBLASLt's D (n x m, ld n), so the hidden
// feature is D's row: the bias (forward) and the bias gradient (backward) are vectors of D's row
// count, and the pre-activation ("aux") is a matrix shaped like D with leading dimension n, which
// cuBLASLt wants a multiple of 8.
//   forward:  D = op_T(A) op_N(B), A = w [n, k] read as a column-major [k, n] (ld k), B = x as
//             [k, m] (ld k); GELU_AUX_BIAS writes gelu(D + bias) to D and D + bias to aux.
//   backward: D = op_N(A) op_N(B), A = w [k, n] read as a column-major [n, k] (ld n), B = grad_out
//             as [k, m] (ld k); DGELU_BGRAD writes D * gelu'(aux) to D and its row sums to the
//             bias pointer.
// Algorithm choice, workspace and refusals: ops/cuda/cublaslt_gemm.h.
#include "ops/cuda/linear_gelu_cuda.h"

#include <string>

#include "ops/cuda/cublaslt_gemm.h"

namespace sublet::ops::cuda {
namespace {

// Tell these problems apart from the other cuBLASLt ops' in the shared plan cache.
constexpr std::int64_t kForwardTag = 2;
constexpr std::int64_t kBackwardTag = 3;

std::string geometry_text(const char* op, DType dtype, const GeluGemmGeometry& g) {
  return std::string(op) + " (" + dtype_name(dtype) + ", m " + std::to_string(g.m) + ", k " + std::to_string(g.k) +
         ", n " + std::to_string(g.n) + ")";
}

// The epilogue's vectors and the aux matrix are read and written with vector accesses.
bool epilogue_pointers_fit(const void* vector, const void* aux) {
  return pointer_alignment(vector) >= 16 && pointer_alignment(aux) >= 16;
}

void set_aux(LtMatmulDesc& desc, const void* aux, std::int64_t n) {
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, n);
}

}  // namespace

bool linear_gelu_forward(const Context& ctx, DType dtype, const GeluGemmGeometry& g, void* out, void* pre,
                         const void* x, const void* w, const void* bias) {
  if (g.m == 0 || g.n == 0) return true;  // nothing to write
  // An empty product (the fallback writes gelu(bias)), a width the aux layout cannot take, or
  // misaligned epilogue operands go the unfused way.
  if (g.k == 0 || !gelu_epilogue_fits(g.n) || !epilogue_pointers_fit(bias, pre)) return false;
  const cudaDataType type = lt_data_type("linear_gelu_forward", dtype);

  LtMatmulDesc desc(dtype);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
  set_aux(desc, pre, g.n);
  const LtLayout a(type, g.k, g.n, g.k), b(type, g.k, g.m, g.k), d(type, g.n, g.m, g.n);
  const std::vector<std::int64_t> key{kForwardTag, g.m, g.k, g.n, pointer_alignment(bias), pointer_alignment(pre)};
  return lt_matmul(ctx, dtype, key, LtProblem{desc, a, w, b, x, d, out},
                   geometry_text("linear_gelu_forward", dtype, g));
}

bool linear_gelu_backward(const Context& ctx, DType dtype, const GeluGemmGeometry& g, void* grad_pre,
                          void* grad_bias, const void* grad_out, const void* w, const void* pre) {
  if (g.n == 0) return true;  // nothing to write
  // No rows or an empty product: zero gradients, which the fallback writes.
  if (g.m == 0 || g.k == 0 || !gelu_epilogue_fits(g.n) || !epilogue_pointers_fit(grad_bias, pre)) return false;
  const cudaDataType type = lt_data_type("linear_gelu_backward", dtype);

  LtMatmulDesc desc(dtype);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DGELU_BGRAD);
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(grad_bias));
  desc.set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type);
  set_aux(desc, pre, g.n);
  const LtLayout a(type, g.n, g.k, g.n), b(type, g.k, g.m, g.k), d(type, g.n, g.m, g.n);
  const std::vector<std::int64_t> key{kBackwardTag, g.m, g.k, g.n, pointer_alignment(grad_bias),
                                      pointer_alignment(pre)};
  return lt_matmul(ctx, dtype, key, LtProblem{desc, a, w, b, grad_out, d, grad_pre},
                   geometry_text("linear_gelu_backward", dtype, g));
}

}  // namespace sublet::ops::cuda
