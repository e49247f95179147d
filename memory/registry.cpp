#include "memory/registry.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/errors.h"
#include "memory/host_backend.h"
#ifdef SUBLET_HAVE_CUDA
#include "memory/cuda_async_backend.h"
#include "memory/cuda_backend.h"
#endif

namespace sublet::memory {
namespace {

constexpr int kMaxCudaDevices = 16;

// Allocators live for the whole process and are never destroyed: tensors in static storage may
// be released after main() returns, and must still find their allocator. Lookups are lock-free
// (every tensor allocation makes one), so a thread may hold a reference to an allocator while
// another replaces it: a replaced allocator is therefore retired, not deleted. It holds no
// allocations (replace_allocator checks) and its cache has been given back (empty_cache), so a
// retired one keeps only its bookkeeping (a few KiB: the Block arena, the backend object); the
// benchmarks replace one per measured cell. Creating or replacing an allocator takes the mutex.
// The Registry itself is never destroyed either (see registry()).
struct Registry {
  std::mutex mutex;
  std::atomic<CachingAllocator*> host{nullptr};
  std::array<std::atomic<CachingAllocator*>, kMaxCudaDevices> cuda{};
  std::vector<std::unique_ptr<CachingAllocator>> retired;  // replaced allocators, kept alive
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

namespace {

void check_device(Device device) {
  if (device.is_cpu()) return;
  if (!cuda_built())
    throw DeviceError("device " + device.str() + " requested, but sublet was built without CUDA");
  if (device.index < 0 || device.index >= cuda_device_count())
    throw DeviceError("device " + device.str() + " requested, but " + std::to_string(cuda_device_count()) +
                      " CUDA device(s) are available");
}

std::atomic<CachingAllocator*>& slot_for(Registry& r, Device device) {
  return device.is_cpu() ? r.host : r.cuda[static_cast<std::size_t>(device.index)];
}

}  // namespace

AllocatorKind parse_allocator_kind(const std::string& text) {
  if (text == "caching") return AllocatorKind::Caching;
  if (text == "raw") return AllocatorKind::Raw;
  if (text == "async") return AllocatorKind::Async;
  throw ValueError("unknown allocator '" + text + "': expected caching, raw or async");
}

const char* allocator_kind_name(AllocatorKind kind) {
  switch (kind) {
    case AllocatorKind::Caching: return "caching";
    case AllocatorKind::Raw: return "raw";
    case AllocatorKind::Async: return "async";
  }
  return "?";
}

AllocatorConfig default_config(Device device) {
  // Decided once per process: the address-space limit does not change under a running program.
  static const bool host_expandable = host_address_space_allows_expandable();
  AllocatorConfig config;
  config.expandable_segments = device.is_cuda() || host_expandable;
  return config;
}

std::unique_ptr<CachingAllocator> make_allocator(Device device, AllocatorKind kind,
                                                 std::optional<AllocatorConfig> requested) {
  check_device(device);
  AllocatorConfig config = requested ? *requested : AllocatorConfig::from_environment(default_config(device));
  if (kind != AllocatorKind::Caching) {
    config.caching = false;  // every tensor its own backend allocation: the baselines
    config.expandable_segments = false;
  }
  if (device.is_cpu()) {
    if (kind == AllocatorKind::Async) throw ValueError("the async allocator (cudaMallocAsync) needs a CUDA device");
    return std::make_unique<CachingAllocator>(std::make_unique<HostBackend>(), config);
  }
#ifdef SUBLET_HAVE_CUDA
  if (kind == AllocatorKind::Async) {
    return std::make_unique<CachingAllocator>(std::make_unique<CudaAsyncBackend>(device.index), config);
  }
  return std::make_unique<CachingAllocator>(std::make_unique<CudaBackend>(device.index), config);
#else
  throw DeviceError("device " + device.str() + " requested, but sublet was built without CUDA");
#endif
}

CachingAllocator& allocator_for(Device device) {
  Registry& r = registry();
  const bool indexable = device.is_cpu() || (device.index >= 0 && device.index < kMaxCudaDevices);
  if (indexable)
    if (CachingAllocator* existing = slot_for(r, device).load(std::memory_order_acquire)) return *existing;
  check_device(device);
  std::lock_guard lock(r.mutex);
  std::atomic<CachingAllocator*>& slot = slot_for(r, device);
  if (!slot.load()) slot.store(make_allocator(device, AllocatorKind::Caching).release(), std::memory_order_release);
  return *slot.load();
}

void replace_allocator(Device device, std::unique_ptr<CachingAllocator> allocator) {
  check_device(device);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::atomic<CachingAllocator*>& slot = slot_for(r, device);
  CachingAllocator* old = slot.load();
  if (old && old->memory_allocated() != 0)
    throw Error("replace_allocator: " + device.str() + " still has " + std::to_string(old->memory_allocated()) +
                " bytes allocated; release every tensor first");
  if (old) {
    // Readers that looked it up before the swap may still use it: keep it, without device memory.
    old->empty_cache();
    r.retired.emplace_back(old);
  }
  slot.store(allocator.release(), std::memory_order_release);
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
