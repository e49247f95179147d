// cuBLASLt, loaded when the first fused GPU linear needs it, as ops/cuda/cublas_loader.cpp loads
// cuBLAS: the executable is not linked against it (its relocated data would weigh on every
// CPU-only command). The cuBLASLt functions sublet calls are defined here under their own
// names and forward to the library, opened with dlopen on first use. A missing library is a
// CudaError naming it, raised where cuBLASLt is first needed.
#include <cublasLt.h>
#include <cublas_api.h>

#include <string>

#include "ops/cuda/lazy_library.h"

namespace sublet::ops::cuda {
namespace {

const std::string& cublaslt_versioned_name() {
  static const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  return name;
}

void* cublaslt_library() {
  static void* const library = open_library(cublaslt_versioned_name(), "libcublasLt.so");
  return library;
}

template <typename Function>
Function* cublaslt_symbol(const char* name) {
  return reinterpret_cast<Function*>(library_function(cublaslt_library(), "cuBLASLt", cublaslt_versioned_name(), name));
}

}  // namespace
}  // namespace sublet::ops::cuda

// Each forwarder resolves its function once, on its first call.
#define SUBLET_CUBLASLT_FORWARD(ret, name, params, args)                                          \
  extern "C" ret name params {                                                                    \
    static auto* const real = ::sublet::ops::cuda::cublaslt_symbol<decltype(name)>(#name);         \
    return real args;                                                                             \
  }

SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescCreate,
                        (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
                        (desc, compute, scale))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulDescSetAttribute,
                        (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t bytes),
                        (desc, attr, buf, bytes))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutCreate,
                        (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld),
                        (layout, type, rows, cols, ld))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                        (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                         size_t bytes),
                        (pref, attr, buf, bytes))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                        (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                         cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                         cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
                         int* returned),
                        (handle, desc, a, b, c, d, pref, requested, results, returned))
SUBLET_CUBLASLT_FORWARD(cublasStatus_t, cublasLtMatmul,
                        (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                         cublasLtMatrixLayout_t a_layout, const void* B, cublasLtMatrixLayout_t b_layout,
                         const void* beta, const void* C, cublasLtMatrixLayout_t c_layout, void* D,
                         cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream),
                        (handle, desc, alpha, A, a_layout, B, b_layout, beta, C, c_layout, D, d_layout, algo,
                         workspace, workspace_bytes, stream))
