#include "profile/history_replay.h"

#include <algorithm>
#include <unordered_map>

#include "memory/annotation.h"
#include "memory/config.h"
#include "core/errors.h"
#include "memory/simulated_backend.h"

namespace sublet::profile {
namespace {

memory::BlockCategory block_category(Category c) {
  switch (c) {
    case Category::Parameter: return memory::BlockCategory::Parameter;
    case Category::Gradient: return memory::BlockCategory::Gradient;
    case Category::Activation: return memory::BlockCategory::Activation;
    case Category::OptimizerState: return memory::BlockCategory::OptimizerState;
    case Category::Workspace: return memory::BlockCategory::Workspace;
    case Category::Input: return memory::BlockCategory::Input;
    case Category::Temporary: return memory::BlockCategory::Temporary;
    case Category::Communication: return memory::BlockCategory::Communication;
    case Category::Autocast: return memory::BlockCategory::Autocast;
  }
  return memory::BlockCategory::Temporary;
}

// Hands out the live run's segment addresses, in the order the live allocator received them.
// Best fit breaks ties between equal free blocks by address, so with the live addresses the
// replay makes the live run's choices exactly, not just the same totals. A request that does not
// match the recording (it cannot happen while the replay follows the live run) gets a fresh
// address above everything recorded.
class RecordedAddressBackend final : public memory::Backend {
 public:
  RecordedAddressBackend(const std::vector<memory::HistoryEvent>& events, std::size_t capacity, Device device)
      : capacity_(capacity), device_(device) {
    for (const auto& e : events) {
      if (e.kind != memory::AllocatorEventKind::SegmentAlloc) continue;
      segments_.push_back({e.address, e.size});
      next_fresh_ = std::max(next_fresh_, e.address + e.size);
    }
    next_fresh_ = (next_fresh_ + (std::uintptr_t{1} << 21)) & ~((std::uintptr_t{1} << 21) - 1);
  }
  std::string name() const override { return "recorded addresses"; }
  Device device() const override { return device_; }
  void* allocate(std::size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    if (next_ < segments_.size() && segments_[next_].second == bytes) return reinterpret_cast<void*>(segments_[next_++].first);
    const std::uintptr_t address = next_fresh_;
    next_fresh_ += bytes;
    return reinterpret_cast<void*>(address);
  }
  void deallocate(void*, std::size_t bytes) override { used_ -= bytes; }
  memory::MemoryInfo memory_info() const override { return {capacity_ - used_, capacity_}; }

 private:
  std::vector<std::pair<std::uintptr_t, std::size_t>> segments_;
  std::size_t next_ = 0;
  std::uintptr_t next_fresh_ = 0;
  std::size_t used_ = 0;
  std::size_t capacity_;
  Device device_;
};

}  // namespace

ReplayedState replay_through(const ProfileRun& run, std::uint64_t through) {
  if (run.events.empty()) return {};
  if (through >= run.events.size()) through = run.events.size() - 1;
  const std::size_t capacity = run.device_capacity > 0 ? run.device_capacity : std::size_t{1} << 40;
  const memory::AllocatorConfig config = memory::AllocatorConfig::parse(run.allocator_config);
  // Expandable segments need a virtual-memory API: the simulated device has one (its addresses
  // differ from the live run's, so equal-size ties may be broken differently).
  std::unique_ptr<memory::Backend> backend;
  if (config.expandable_segments) backend = std::make_unique<memory::SimulatedBackend>(capacity, run.options.device);
  else backend = std::make_unique<RecordedAddressBackend>(run.events, capacity, run.options.device);
  memory::CachingAllocator allocator(std::move(backend), config);
  std::unordered_map<std::uintptr_t, memory::Block*> live;  // live-run address -> replayed block
  for (std::uint64_t i = 0; i <= through; ++i) {
    const memory::HistoryEvent& e = run.events[i];
    if (e.kind == memory::AllocatorEventKind::Alloc) {
      memory::AnnotationScope scope(e.annotation);
      memory::Block* b = allocator.allocate(e.requested_size, e.stream, block_category(run.accounting.category[i]));
      live[e.address] = b;
    } else if (e.kind == memory::AllocatorEventKind::FreeRequested) {
      auto it = live.find(e.address);
      if (it == live.end()) continue;  // allocated before recording began
      allocator.free(it->second);
      live.erase(it);
    }
  }
  ReplayedState state;
  state.segments = allocator.snapshot();
  state.summary = allocator.memory_summary();
  state.allocated = allocator.memory_allocated();
  state.reserved = allocator.memory_reserved();
  state.peak_reserved = allocator.max_memory_reserved();
  state.largest_free_block = allocator.largest_free_block();
  state.fragmentation = allocator.fragmentation();
  state.waste = allocator.waste();
  state.waste_at_reserved_peak = allocator.waste_at_peak();
  for (auto& [address, block] : live) allocator.free(block);
  return state;
}

}  // namespace sublet::profile
