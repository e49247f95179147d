#include "memory/cuda_check.h"

#include <string>

#include "memory/cuda_driver.h"
#include "core/errors.h"

namespace sublet::detail {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear the sticky-free error state so the process can go on
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

void throw_cu_error(CUresult error, const char* call, const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  memory::driver_api().get_error_name(error, &name);
  memory::driver_api().get_error_string(error, &text);
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  (name ? name : "unknown") + " (" + (text ? text : "no description") + ")");
}

}  // namespace sublet::detail
