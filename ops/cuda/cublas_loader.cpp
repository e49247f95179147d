// cuBLAS, loaded when the first GPU matmul needs it rather than when the program starts: linked
// normally, libcublas pulls in libcublasLt, whose relocated data would make `sublet --help` and
// every CPU-only command take hundreds of megabytes resident. The eleven cuBLAS functions sublet
// calls are defined here under their own names (the executable is not linked against cuBLAS)
// and forward to the library, opened with dlopen on first use. A missing library is a CudaError
// naming it, raised where cuBLAS is first needed.
#include <cublas_v2.h>

#include <string>

#include "ops/cuda/lazy_library.h"

namespace sublet::ops::cuda {
namespace {

const std::string& cublas_versioned_name() {
  static const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  return name;
}

void* cublas_library() {
  static void* const library = open_library(cublas_versioned_name(), "libcublas.so");
  return library;
}

template <typename Function>
Function* cublas_symbol(const char* name) {
  return reinterpret_cast<Function*>(library_function(cublas_library(), "cuBLAS", cublas_versioned_name(), name));
}

}  // namespace
}  // namespace sublet::ops::cuda

// Each forwarder resolves its function once, on its first call.
#define SUBLET_CUBLAS_FORWARD(ret, name, params, args)                                             \
  extern "C" ret name params {                                                                     \
    static auto* const real = ::sublet::ops::cuda::cublas_symbol<decltype(name)>(#name);            \
    return real args;                                                                              \
  }

SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasSetWorkspace_v2, (cublasHandle_t handle, void* workspace, size_t bytes),
                      (handle, workspace, bytes))
SUBLET_CUBLAS_FORWARD(const char*, cublasGetStatusName, (cublasStatus_t status), (status))
SUBLET_CUBLAS_FORWARD(const char*, cublasGetStatusString, (cublasStatus_t status), (status))
SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasSgemmStridedBatched,
                      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                       const float* alpha, const float* A, int lda, long long int strideA, const float* B, int ldb,
                       long long int strideB, const float* beta, float* C, int ldc, long long int strideC, int batchCount),
                      (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
                       batchCount))
SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasDgemmStridedBatched,
                      (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                       const double* alpha, const double* A, int lda, long long int strideA, const double* B, int ldb,
                       long long int strideB, const double* beta, double* C, int ldc, long long int strideC, int batchCount),
                      (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
                       batchCount))
SUBLET_CUBLAS_FORWARD(cublasStatus_t, cublasGetMathMode, (cublasHandle_t handle, cublasMath_t* mode), (handle, mode))

// The 16-bit GEMM (ops/cuda/matmul_cuda.cpp). Spelled out rather than through the macro: in C++
// the header adds an inline overload of the same name (taking a cudaDataType compute type), so
// decltype(cublasGemmStridedBatchedEx) would be ambiguous.
using GemmStridedBatchedExFn = cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                              const void*, const void*, cudaDataType, int, long long int, const void*,
                                              cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                              long long int, int, cublasComputeType_t, cublasGemmAlgo_t);
extern "C" cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                     cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                                     const void* A, cudaDataType Atype, int lda, long long int strideA,
                                                     const void* B, cudaDataType Btype, int ldb, long long int strideB,
                                                     const void* beta, void* C, cudaDataType Ctype, int ldc,
                                                     long long int strideC, int batchCount,
                                                     cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  static auto* const real = ::sublet::ops::cuda::cublas_symbol<GemmStridedBatchedExFn>("cublasGemmStridedBatchedEx");
  return real(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype,
              ldc, strideC, batchCount, computeType, algo);
}
