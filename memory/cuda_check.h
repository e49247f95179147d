#pragma once
// Every CUDA runtime and driver call goes through these checks: a failure throws CudaError
// naming the call, the file and the line, and the driver's own description.
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace sublet::detail {
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);
[[noreturn]] void throw_cu_error(CUresult error, const char* call, const char* file, int line);
}  // namespace sublet::detail

#define SUBLET_CUDA_CHECK(call)                                                          \
  do {                                                                                   \
    const cudaError_t sublet_status_ = (call);                                           \
    if (sublet_status_ != cudaSuccess)                                                   \
      ::sublet::detail::throw_cuda_error(sublet_status_, #call, __FILE__, __LINE__);     \
  } while (0)

#define SUBLET_CU_CHECK(call)                                                            \
  do {                                                                                   \
    const CUresult sublet_status_ = (call);                                              \
    if (sublet_status_ != CUDA_SUCCESS)                                                  \
      ::sublet::detail::throw_cu_error(sublet_status_, #call, __FILE__, __LINE__);       \
  } while (0)
