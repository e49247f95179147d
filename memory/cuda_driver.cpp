#include "memory/cuda_driver.h"

#include <cuda_runtime_api.h>

#include <string>

#include "core/errors.h"

namespace sublet::memory {
namespace {

template <typename Function>
void load(Function& slot, const char* symbol) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // 12000: the ABI version of these functions as declared by the CUDA 12+ headers.
  const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || address == nullptr) {
    cudaGetLastError();
    throw CudaError(std::string("the CUDA driver does not provide ") + symbol + " (needed for expandable segments): " +
                    cudaGetErrorString(status));
  }
  slot = reinterpret_cast<Function>(address);
}

DriverApi load_driver_api() {
  DriverApi api;
  load(api.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  load(api.mem_address_reserve, "cuMemAddressReserve");
  load(api.mem_address_free, "cuMemAddressFree");
  load(api.mem_create, "cuMemCreate");
  load(api.mem_release, "cuMemRelease");
  load(api.mem_map, "cuMemMap");
  load(api.mem_unmap, "cuMemUnmap");
  load(api.mem_set_access, "cuMemSetAccess");
  load(api.get_error_name, "cuGetErrorName");
  load(api.get_error_string, "cuGetErrorString");
  return api;
}

}  // namespace

const DriverApi& driver_api() {
  static const DriverApi api = load_driver_api();
  return api;
}

}  // namespace sublet::memory
