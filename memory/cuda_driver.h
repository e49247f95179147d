#pragma once
// The few CUDA driver-API functions the backend needs (virtual memory management), fetched at
// run time through the runtime's entry-point query. Linking libcuda directly would make every
// binary fail to start on machines without an NVIDIA driver, CPU-only runs included.
#include <cuda.h>

namespace sublet::memory {

struct DriverApi {
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
};

// Loaded once; throws CudaError naming the missing function if the driver lacks one.
const DriverApi& driver_api();

}  // namespace sublet::memory
