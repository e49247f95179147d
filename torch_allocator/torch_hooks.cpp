// Optional, built only against PyTorch's headers (python -m sublet_torch.build_hooks, or the Python
// package's build when PyTorch's headers are there; never by CMake): libsublet_torch_hooks.so makes
// sublet's allocator PyTorch's through a subclass of PyTorch's CUDAPluggableAllocator that answers
// what the plain pluggable allocator refuses:
//   cacheInfo (cuDNN's benchmark asks it for the largest free block: with the plain pluggable
//   allocator, torch.backends.cudnn.benchmark = True fails), getDeviceStats, resetPeakStats and
//   resetAccumulatedStats (so torch.cuda.memory_allocated(), memory_stats(), memory_summary(),
//   max_memory_*() and reset_peak_memory_stats() work as with PyTorch's own allocator),
// and wires PyTorch's hooks: record_stream (tensor.record_stream), reset (torch.cuda.empty_cache)
// and memory_fraction (torch.cuda.set_per_process_memory_fraction). An allocation that runs out of
// memory throws c10::OutOfMemoryError, which Python sees as torch.OutOfMemoryError.
// It calls libsublet_torch_allocator.so through its C interface, found in the process by its
// path (python/sublet_torch loads that first): one allocator table serves both.
#include <dlfcn.h>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/Exception.h>
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>

namespace {

// The functions of sublet_torch_allocator.h this file uses.
struct Core {
  void* (*try_malloc)(ssize_t, int, cudaStream_t) = nullptr;
  int (*last_error_is_out_of_memory)() = nullptr;
  void (*free)(void*, ssize_t, int, cudaStream_t) = nullptr;
  int (*record_stream)(void*, cudaStream_t) = nullptr;
  int (*empty_cache)(int) = nullptr;
  int (*reset_peak)(int) = nullptr;
  int (*reset_accumulated)(int) = nullptr;
  int (*set_memory_fraction)(double, int) = nullptr;
  int (*stat)(int, const char*, int64_t*) = nullptr;
  int (*cache_info)(int, size_t*) = nullptr;
  size_t (*last_error)(char*, size_t) = nullptr;
};

Core core;

std::string core_error() {
  // Out-of-memory reports can be long: ask for the size first.
  std::string text(core.last_error(nullptr, 0), '\0');
  core.last_error(&text[0], text.size() + 1);
  return text;
}

void check(int status, const char* what) {
  if (status != 0) throw std::runtime_error(std::string("sublet_torch hooks: ") + what + ": " + core_error());
}

int64_t stat(int device, const std::string& key) {
  int64_t value = 0;
  check(core.stat(device, key.c_str(), &value), key.c_str());
  return value;
}

using Base = torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator;
// DeviceStats moved between namespaces over PyTorch versions: take the base class's return type.
using Stats = decltype(std::declval<Base&>().getDeviceStats(c10::DeviceIndex{}));

template <typename StatT>
void fill(StatT& s, int device, const std::string& name) {
  s.current = stat(device, name + ".current");
  s.peak = stat(device, name + ".peak");
  s.allocated = stat(device, name + ".allocated");
  s.freed = stat(device, name + ".freed");
}

template <typename ArrayT>
void fill_array(ArrayT& a, int device, const std::string& family) {
  fill(a[0], device, family + ".all");
  fill(a[1], device, family + ".small_pool");
  fill(a[2], device, family + ".large_pool");
}

// (Not named allocate: inside SubletAllocator that name is the base class's member, PyTorch 2.11 on.)
// The core's allocation with PyTorch's exceptions: c10::OutOfMemoryError (torch.OutOfMemoryError in
// Python) when the device is full, c10::Error (RuntimeError) for anything else.
void* allocate_or_throw(size_t size, int device, cudaStream_t stream) {
  void* ptr = core.try_malloc(static_cast<ssize_t>(size), device, stream);
  if (ptr != nullptr) return ptr;
  const std::string message = core_error();
  if (core.last_error_is_out_of_memory()) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  }
  TORCH_CHECK(false, message);
  return nullptr;  // not reached: TORCH_CHECK(false, ...) throws
}

class SubletAllocator : public Base {
 public:
  SubletAllocator() : Base(allocate_or_throw, core.free) {
    set_record_stream_fn([](void* ptr, cudaStream_t stream) { check(core.record_stream(ptr, stream), "record_stream"); });
    set_reset_fn([] { check(core.empty_cache(-1), "empty_cache"); });
    set_memory_fraction_fn(
        [](double fraction, int device) { check(core.set_memory_fraction(fraction, device), "set_memory_fraction"); });
  }

  // What cuDNN's benchmark may take as a workspace: as PyTorch's own allocator answers, the larger
  // of the device's free memory and the largest free cached block.
  void cacheInfo(c10::DeviceIndex device, size_t* largest_block) override {
    check(core.cache_info(device, largest_block), "cacheInfo");
  }

  Stats getDeviceStats(c10::DeviceIndex device) override {
    Stats s;
    fill_array(s.allocation, device, "allocation");
    fill_array(s.segment, device, "segment");
    fill_array(s.active, device, "active");
    fill_array(s.inactive_split, device, "inactive_split");
    fill_array(s.allocated_bytes, device, "allocated_bytes");
    fill_array(s.reserved_bytes, device, "reserved_bytes");
    fill_array(s.active_bytes, device, "active_bytes");
    fill_array(s.inactive_split_bytes, device, "inactive_split_bytes");
    fill_array(s.requested_bytes, device, "requested_bytes");
    s.num_alloc_retries = stat(device, "num_alloc_retries");
    s.num_ooms = stat(device, "num_ooms");
    fill(s.oversize_allocations, device, "oversize_allocations");
    fill(s.oversize_segments, device, "oversize_segments");
    s.num_sync_all_streams = stat(device, "num_sync_all_streams");
    s.num_device_alloc = stat(device, "num_device_alloc");
    s.num_device_free = stat(device, "num_device_free");
    s.max_split_size = stat(device, "max_split_size");
    return s;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override { check(core.reset_accumulated(device), "reset_accumulated"); }
  void resetPeakStats(c10::DeviceIndex device) override { check(core.reset_peak(device), "reset_peak_memory_stats"); }
};

template <typename F>
void load(void* library, F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(library, name));
  if (slot == nullptr) throw std::runtime_error(std::string("sublet_torch hooks: the core library has no ") + name);
}

thread_local std::string hooks_error;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int sublet_torch_hooks_install(const char* core_library) {
  try {
    // RTLD_NOLOAD: the instance python/sublet_torch already loaded, never a second copy.
    void* library = dlopen(core_library, RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr)
      throw std::runtime_error(std::string("sublet_torch hooks: ") + core_library + " is not loaded in this process (" +
                               dlerror() + "); load it first (sublet_torch.load)");
    load(library, core.try_malloc, "sublet_torch_try_malloc");
    load(library, core.last_error_is_out_of_memory, "sublet_torch_last_error_is_out_of_memory");
    load(library, core.free, "sublet_torch_free");
    load(library, core.record_stream, "sublet_torch_record_stream");
    load(library, core.empty_cache, "sublet_torch_empty_cache");
    load(library, core.reset_peak, "sublet_torch_reset_peak_memory_stats");
    load(library, core.reset_accumulated, "sublet_torch_reset_accumulated_memory_stats");
    load(library, core.set_memory_fraction, "sublet_torch_set_memory_fraction");
    load(library, core.stat, "sublet_torch_stat");
    load(library, core.cache_info, "sublet_torch_cache_info");
    load(library, core.last_error, "sublet_torch_last_error");
    auto allocator = std::make_shared<SubletAllocator>();
    allocator->init(static_cast<int>(c10::cuda::device_count()));
    // Refuses (c10::Error) once PyTorch's own allocator has served an allocation.
    torch::cuda::CUDAPluggableAllocator::changeCurrentAllocator(allocator);
    return 0;
  } catch (const std::exception& e) {
    hooks_error = e.what();
    return -1;
  }
}

__attribute__((visibility("default"))) size_t sublet_torch_hooks_last_error(char* out, size_t capacity) {
  if (out != nullptr && capacity > hooks_error.size()) {
    std::memcpy(out, hooks_error.data(), hooks_error.size());
    out[hooks_error.size()] = '\0';
  }
  return hooks_error.size();
}

}  // extern "C"
