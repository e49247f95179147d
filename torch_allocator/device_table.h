#pragma once
// The allocators behind libsublet_torch_allocator.so: one sublet CachingAllocator per device,
// created at first use, and the map from each pointer handed to PyTorch to its Block (PyTorch
// frees by pointer; sublet frees by Block). Its own table, not memory::allocator_for's registry:
// the library's tests put simulated devices in it on machines without CUDA, where the registry
// refuses CUDA devices.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/history.h"

namespace sublet::torch_allocator {

inline constexpr int kMaxDevices = 64;

struct LiveAllocations {
  std::int64_t count = 0;
  std::int64_t requested_bytes = 0;
  std::int64_t block_bytes = 0;
};

class DeviceTable {
 public:
  // The process's table; never destroyed (PyTorch may free tensors after main() returns).
  static DeviceTable& instance();

  void* allocate(std::size_t bytes, int device, StreamHandle stream);
  // Throws ValueError for a pointer this table did not hand out on `device`.
  void free(void* ptr, int device);
  void record_stream(void* ptr, StreamHandle stream);

  // The device's allocator, created when missing (ValueError for a device index out of range).
  memory::CachingAllocator& allocator(int device);
  // nullptr while the device has no allocator.
  memory::CachingAllocator* existing(int device) const;
  // Devices that have an allocator, in index order.
  std::vector<int> devices() const;
  // The settings a device's allocator has, or would get if created now.
  memory::AllocatorConfig config_for(int device) const;
  // Settings (SUBLET_ALLOC_CONF syntax) for the allocators created from now on, instead of the
  // environment's; nullopt: the environment's again. ConfigError for bad text; Error once an
  // allocator exists with other settings (they apply only from the first allocation on).
  void set_config_text(std::optional<std::string> text);

  // Called before each allocation, outside every lock, while set: returns the annotation id
  // (memory::intern_annotation) of the caller's stack, which the block and its history events carry.
  using FramesCallback = std::uint32_t (*)();
  void set_frames_callback(FramesCallback callback) { frames_callback_.store(callback, std::memory_order_release); }

  LiveAllocations live(int device) const;

  // Devices become simulated ones of `capacity_bytes` (tests); Error once any allocator exists.
  void use_simulated(int count, std::size_t capacity_bytes);

  // Recording of allocator events for snapshots; see sublet_torch_record_history.
  void record_history(bool enabled, std::size_t max_entries);
  bool recording() const;
  // The device's recorded events, oldest first (empty when not recording).
  std::vector<memory::HistoryEvent> history(int device) const;

 private:
  DeviceTable() = default;
  struct Slot {
    std::atomic<memory::CachingAllocator*> allocator{nullptr};
    mutable std::mutex blocks_mutex;
    std::unordered_map<void*, memory::Block*> blocks;  // live pointers handed out
    std::unique_ptr<memory::AllocationHistory> history;  // guarded by create_mutex_
  };
  Slot& slot(int device);
  const Slot& slot(int device) const;
  std::unique_ptr<memory::CachingAllocator> make(int device) const;

  std::array<Slot, kMaxDevices> slots_;
  mutable std::mutex create_mutex_;  // creating allocators, simulation and history switches
  int simulated_count_ = 0;
  std::size_t simulated_capacity_ = 0;
  std::optional<std::size_t> history_entries_;  // set while recording
  mutable std::mutex config_mutex_;
  std::optional<std::string> config_text_;  // guarded by config_mutex_
  std::atomic<FramesCallback> frames_callback_{nullptr};
};

}  // namespace sublet::torch_allocator
