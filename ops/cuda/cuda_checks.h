#pragma once
// Checks for the libraries the CUDA kernels call. Like SUBLET_CUDA_CHECK (memory/cuda_check.h),
// a failure throws sublet::CudaError naming the call, the file, the line and the library's own
// description of the status, so a failing op on the GPU machine says exactly what went wrong.
#include <cublas_v2.h>
#include <cudnn.h>

#include "memory/cuda_check.h"

namespace sublet::detail {
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);
}  // namespace sublet::detail

#define SUBLET_CUBLAS_CHECK(call)                                                          \
  do {                                                                                     \
    const cublasStatus_t sublet_status_ = (call);                                          \
    if (sublet_status_ != CUBLAS_STATUS_SUCCESS)                                           \
      ::sublet::detail::throw_cublas_error(sublet_status_, #call, __FILE__, __LINE__);     \
  } while (0)

#define SUBLET_CUDNN_CHECK(call)                                                           \
  do {                                                                                     \
    const cudnnStatus_t sublet_status_ = (call);                                           \
    if (sublet_status_ != CUDNN_STATUS_SUCCESS)                                            \
      ::sublet::detail::throw_cudnn_error(sublet_status_, #call, __FILE__, __LINE__);      \
  } while (0)

// A kernel launch reports bad configurations only through the sticky last-error slot: check it
// right after each launch so the error names the kernel that caused it.
#define SUBLET_CUDA_LAUNCH_CHECK(kernel_name)                                                   \
  do {                                                                                         \
    const cudaError_t sublet_status_ = cudaGetLastError();                                     \
    if (sublet_status_ != cudaSuccess)                                                         \
      ::sublet::detail::throw_cuda_error(sublet_status_, "launch of " #kernel_name, __FILE__, __LINE__); \
  } while (0)
