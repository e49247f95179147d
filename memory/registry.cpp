#include "memory/registry.h"

#include <array>
#include <memory>
#include <mutex>

#include "memory/errors.h"
#include "memory/host_backend.h"
#ifdef SUBLET_HAVE_CUDA
#include "memory/cuda_backend.h"
#endif

namespace sublet::memory {
namespace {

constexpr int kMaxCudaDevices = 16;

// Allocators live for the whole process and are never destroyed: tensors in static storage may
// be released after main() returns, and must still find their allocator.
struct Registry {
  std::mutex mutex;
  CachingAllocator* host = nullptr;
  std::array<CachingAllocator*, kMaxCudaDevices> cuda{};
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

bool cuda_built() {
#ifdef SUBLET_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef SUBLET_HAVE_CUDA
  static const int count = CudaBackend::device_count();
  return count;
#else
  return 0;
#endif
}

bool cuda_available() { return cuda_device_count() > 0; }

Device default_device() { return cuda_available() ? Device::cuda(0) : Device::cpu(); }

CachingAllocator& allocator_for(Device device) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (device.is_cpu()) {
    if (!r.host) r.host = new CachingAllocator(std::make_unique<HostBackend>(), AllocatorConfig::from_environment());
    return *r.host;
  }
  if (!cuda_built())
    throw DeviceError("device " + device.str() + " requested, but sublet was built without CUDA");
  if (device.index < 0 || device.index >= cuda_device_count())
    throw DeviceError("device " + device.str() + " requested, but " + std::to_string(cuda_device_count()) +
                      " CUDA device(s) are available");
  CachingAllocator*& slot = r.cuda[static_cast<std::size_t>(device.index)];
#ifdef SUBLET_HAVE_CUDA
  if (!slot) slot = new CachingAllocator(std::make_unique<CudaBackend>(device.index), AllocatorConfig::from_environment());
#endif
  return *slot;
}

}  // namespace sublet::memory

namespace sublet {

using memory::allocator_for;

std::size_t memory_allocated(Device device) { return allocator_for(device).memory_allocated(); }
std::size_t memory_reserved(Device device) { return allocator_for(device).memory_reserved(); }
std::size_t max_memory_allocated(Device device) { return allocator_for(device).max_memory_allocated(); }
std::size_t max_memory_reserved(Device device) { return allocator_for(device).max_memory_reserved(); }
void reset_peak_memory_stats(Device device) { allocator_for(device).reset_peak_memory_stats(); }
void reset_accumulated_memory_stats(Device device) { allocator_for(device).reset_accumulated_memory_stats(); }
std::map<std::string, std::int64_t> memory_stats(Device device) { return allocator_for(device).memory_stats(); }
std::string memory_summary(Device device) { return allocator_for(device).memory_summary(); }
void empty_cache(Device device) { allocator_for(device).empty_cache(); }

}  // namespace sublet
