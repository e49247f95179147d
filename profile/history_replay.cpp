#include "profile/history_replay.h"

#include <unordered_map>

#include "memory/annotation.h"
#include "memory/config.h"
#include "memory/errors.h"
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
  }
  return memory::BlockCategory::Temporary;
}

}  // namespace

ReplayedState replay_through(const ProfileRun& run, std::uint64_t through) {
  if (run.events.empty()) return {};
  if (through >= run.events.size()) through = run.events.size() - 1;
  const std::size_t capacity = run.device_capacity > 0 ? run.device_capacity : std::size_t{1} << 40;
  memory::CachingAllocator allocator(std::make_unique<memory::SimulatedBackend>(capacity, run.options.device),
                                     memory::AllocatorConfig::parse(run.allocator_config));
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
  for (auto& [address, block] : live) allocator.free(block);
  return state;
}

}  // namespace sublet::profile
