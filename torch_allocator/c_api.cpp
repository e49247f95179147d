// The extern "C" functions of sublet_torch_allocator.h over DeviceTable. Each one is a thin
// wrapper: catch, keep the message for sublet_torch_last_error, return a status.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>

#include "core/errors.h"
#include "memory/annotation.h"
#include "memory/registry.h"
#include "torch_allocator/device_table.h"
#include "torch_allocator/snapshot_pickle.h"
#include "torch_allocator/sublet_torch_allocator.h"

namespace {

using sublet::torch_allocator::DeviceTable;

thread_local std::string last_error;
thread_local bool last_error_out_of_memory = false;

int fail(const char* function, const std::exception& e) {
  last_error = std::string(function) + ": " + e.what();
  last_error_out_of_memory = dynamic_cast<const sublet::OutOfMemoryError*>(&e) != nullptr;
  return -1;
}

template <typename F>
int guarded(const char* function, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    return fail(function, e);
  } catch (...) {
    last_error = std::string(function) + ": unknown exception";
    last_error_out_of_memory = false;
    return -1;
  }
}

// Copies `text` out as the text functions promise; returns its length.
std::size_t copy_out(const std::string& text, char* out, std::size_t capacity) {
  if (out != nullptr && capacity > text.size()) {
    std::memcpy(out, text.data(), text.size());
    out[text.size()] = '\0';
  }
  return text.size();
}

template <typename F>
std::size_t text_result(const char* function, char* out, std::size_t capacity, F&& make) {
  std::string text;
  if (guarded(function, [&] { text = make(); }) != 0) return 0;
  return copy_out(text, out, capacity);
}

sublet::StreamHandle handle(cudaStream_t stream) { return static_cast<sublet::StreamHandle>(stream); }

std::size_t checked_size(ssize_t size, const char* function) {
  if (size < 0) throw sublet::ValueError(std::string(function) + ": negative size " + std::to_string(size));
  return static_cast<std::size_t>(size);
}

// A device's statistics; zeros (and the settings' max_split_size) before its first allocation.
std::map<std::string, std::int64_t> stats_of(int device) {
  DeviceTable& table = DeviceTable::instance();
  if (sublet::memory::CachingAllocator* a = table.existing(device)) return a->memory_stats();
  sublet::memory::DeviceStats empty;
  const sublet::memory::AllocatorConfig config = table.config_for(device);
  empty.max_split_size = config.max_split_size_set() ? static_cast<std::int64_t>(config.max_split_size) : -1;
  std::map<std::string, std::int64_t> out = empty.to_map();
  sublet::memory::put_waste_stats(out, {}, {});
  return out;
}

template <typename F>
void for_devices(int device, F&& f) {
  DeviceTable& table = DeviceTable::instance();
  if (device >= 0) {
    if (sublet::memory::CachingAllocator* a = table.existing(device)) f(*a);
    return;
  }
  for (int d : table.devices()) f(*table.existing(d));
}

}  // namespace

extern "C" {

void* sublet_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  return DeviceTable::instance().allocate(checked_size(size, "sublet_torch_malloc"), device, handle(stream));
}

void* sublet_torch_try_malloc(ssize_t size, int device, cudaStream_t stream) {
  void* ptr = nullptr;
  guarded("sublet_torch_malloc", [&] { ptr = sublet_torch_malloc(size, device, stream); });
  return ptr;
}

void sublet_torch_free(void* ptr, ssize_t /*size*/, int device, cudaStream_t /*stream*/) {
  // The block knows its size and stream; PyTorch's copies of them are not needed.
  if (guarded("sublet_torch_free", [&] { DeviceTable::instance().free(ptr, device); }) != 0)
    std::fprintf(stderr, "sublet_torch: %s\n", last_error.c_str());
}

int sublet_torch_record_stream(void* ptr, cudaStream_t stream) {
  return guarded("sublet_torch_record_stream", [&] { DeviceTable::instance().record_stream(ptr, handle(stream)); });
}

int sublet_torch_empty_cache(int device) {
  return guarded("sublet_torch_empty_cache", [&] { for_devices(device, [](auto& a) { a.empty_cache(); }); });
}

int sublet_torch_reset_peak_memory_stats(int device) {
  return guarded("sublet_torch_reset_peak_memory_stats",
                 [&] { for_devices(device, [](auto& a) { a.reset_peak_memory_stats(); }); });
}

int sublet_torch_reset_accumulated_memory_stats(int device) {
  return guarded("sublet_torch_reset_accumulated_memory_stats",
                 [&] { for_devices(device, [](auto& a) { a.reset_accumulated_memory_stats(); }); });
}

int sublet_torch_set_memory_fraction(double fraction, int device) {
  return guarded("sublet_torch_set_memory_fraction", [&] {
    if (!(fraction >= 0.0 && fraction <= 1.0))  // NaN fails too
      throw sublet::ValueError("fraction must be in [0, 1], got " + std::to_string(fraction));
    // Created now so that the cap holds from the first allocation on.
    DeviceTable::instance().allocator(device).set_memory_fraction(fraction);
  });
}

int sublet_torch_cache_info(int device, size_t* largest_block) {
  return guarded("sublet_torch_cache_info", [&] {
    if (largest_block == nullptr) throw sublet::ValueError("largest_block must not be null");
    sublet::memory::CachingAllocator& a = DeviceTable::instance().allocator(device);
    *largest_block = std::max(a.backend().memory_info().free_bytes, a.largest_free_block());
  });
}

int sublet_torch_stat(int device, const char* key, int64_t* value) {
  return guarded("sublet_torch_stat", [&] {
    if (key == nullptr || value == nullptr) throw sublet::ValueError("key and value must not be null");
    const auto stats = stats_of(device);
    const auto it = stats.find(key);
    if (it == stats.end()) throw sublet::ValueError(std::string("unknown statistic '") + key + "'");
    *value = it->second;
  });
}

size_t sublet_torch_memory_stats(int device, char* out, size_t capacity) {
  return text_result("sublet_torch_memory_stats", out, capacity, [&] {
    std::string text;
    for (const auto& [key, value] : stats_of(device)) text += key + " " + std::to_string(value) + "\n";
    return text;
  });
}

size_t sublet_torch_memory_summary(int device, char* out, size_t capacity) {
  return text_result("sublet_torch_memory_summary", out, capacity, [&] {
    sublet::memory::CachingAllocator* a = DeviceTable::instance().existing(device);
    if (a) return a->memory_summary();
    return "\nsublet memory summary, device cuda:" + std::to_string(device) + ": nothing allocated yet\n";
  });
}

size_t sublet_torch_config(int device, char* out, size_t capacity) {
  return text_result("sublet_torch_config", out, capacity, [&] {
    DeviceTable& table = DeviceTable::instance();
    sublet::memory::CachingAllocator* a = table.existing(device);
    const std::string backend = a ? a->backend().name() : "(no allocator yet)";
    return table.config_for(device).to_string() + "\n" + backend;
  });
}

size_t sublet_torch_last_error(char* out, size_t capacity) { return copy_out(last_error, out, capacity); }

int sublet_torch_last_error_is_out_of_memory(void) { return last_error_out_of_memory ? 1 : 0; }

int sublet_torch_set_config(const char* conf) {
  return guarded("sublet_torch_set_config", [&] {
    DeviceTable::instance().set_config_text(conf ? std::optional<std::string>(conf) : std::nullopt);
  });
}

void sublet_torch_set_frames_callback(sublet_torch_frames_fn callback) {
  DeviceTable::instance().set_frames_callback(callback);
}

uint32_t sublet_torch_intern_frames(const char* frames) {
  uint32_t id = 0;
  guarded("sublet_torch_intern_frames", [&] {
    if (frames == nullptr) throw sublet::ValueError("frames must not be null");
    id = sublet::memory::intern_annotation(frames);
  });
  return id;
}

const char* sublet_torch_version(void) { return SUBLET_TORCH_VERSION; }

int sublet_torch_live_allocations(int device, int64_t* count, int64_t* requested_bytes, int64_t* block_bytes) {
  return guarded("sublet_torch_live_allocations", [&] {
    const auto live = DeviceTable::instance().live(device);
    if (count) *count = live.count;
    if (requested_bytes) *requested_bytes = live.requested_bytes;
    if (block_bytes) *block_bytes = live.block_bytes;
  });
}

int sublet_torch_device_count(void) {
  const auto devices = DeviceTable::instance().devices();
  return devices.empty() ? 0 : devices.back() + 1;
}

int sublet_torch_record_history(int enabled, size_t max_entries) {
  return guarded("sublet_torch_record_history", [&] { DeviceTable::instance().record_history(enabled != 0, max_entries); });
}

int sublet_torch_dump_snapshot(const char* path) {
  return guarded("sublet_torch_dump_snapshot", [&] {
    if (path == nullptr || *path == '\0') throw sublet::ValueError("a path is needed");
    sublet::torch_allocator::write_snapshot(path, DeviceTable::instance());
  });
}

int sublet_torch_use_simulated_devices(int count, size_t capacity_bytes) {
  return guarded("sublet_torch_use_simulated_devices",
                 [&] { DeviceTable::instance().use_simulated(count, capacity_bytes); });
}

int sublet_torch_cuda_built(void) { return sublet::memory::cuda_built() ? 1 : 0; }

}  // extern "C"
