#include "memory/pinned_host.h"

#include <memory>

#include "core/errors.h"
#ifdef SUBLET_HAVE_CUDA
#include "memory/pinned_host_backend.h"
#endif

namespace sublet::memory {

CachingAllocator& pinned_allocator() {
#ifdef SUBLET_HAVE_CUDA
  // Leaked on purpose, as the device allocators of the registry (see the header).
  static CachingAllocator* allocator = new CachingAllocator(std::make_unique<PinnedHostBackend>(), AllocatorConfig{});
  return *allocator;
#else
  throw DeviceError("pinned host memory requested, but sublet was built without CUDA");
#endif
}

StreamHandle pinned_host_stream() {
  // The address of an object of this library: never a handle the CUDA runtime hands out, and
  // neither nullptr nor the runtime's special handles cudaStreamLegacy (1) / cudaStreamPerThread (2).
  static char host_order = 0;
  return &host_order;
}

}  // namespace sublet::memory
