#include "ops/cuda/cuda_checks.h"

#include <string>

#include "core/errors.h"

namespace sublet::detail {

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  // cuDNN 9 keeps the detail of the last failure in a per-thread message buffer.
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  std::string message = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        cudnnGetErrorString(status);
  if (detail[0] != '\0') message += std::string(" (") + detail + ")";
  throw CudaError(message);
}

}  // namespace sublet::detail
