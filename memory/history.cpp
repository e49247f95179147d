#include "memory/history.h"

#include "core/errors.h"

namespace sublet::memory {

const char* event_kind_name(AllocatorEventKind kind) {
  switch (kind) {
    case AllocatorEventKind::Alloc: return "alloc";
    case AllocatorEventKind::FreeRequested: return "free_requested";
    case AllocatorEventKind::FreeCompleted: return "free_completed";
    case AllocatorEventKind::SegmentAlloc: return "segment_alloc";
    case AllocatorEventKind::SegmentFree: return "segment_free";
    case AllocatorEventKind::SegmentMap: return "segment_map";
    case AllocatorEventKind::SegmentUnmap: return "segment_unmap";
    case AllocatorEventKind::Oom: return "oom";
    case AllocatorEventKind::CacheEmptied: return "empty_cache";
    case AllocatorEventKind::PeaksReset: return "reset_peaks";
  }
  return "?";
}

const char* category_name(BlockCategory category) {
  switch (category) {
    case BlockCategory::Unknown: return "unknown";
    case BlockCategory::Parameter: return "parameter";
    case BlockCategory::Gradient: return "gradient";
    case BlockCategory::Activation: return "activation";
    case BlockCategory::OptimizerState: return "optimizer_state";
    case BlockCategory::Workspace: return "workspace";
    case BlockCategory::Input: return "input";
    case BlockCategory::Temporary: return "temporary";
    case BlockCategory::Communication: return "communication";
    case BlockCategory::Autocast: return "autocast";
  }
  return "?";
}

std::optional<BlockCategory> category_from_name(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(BlockCategory::Autocast); ++c) {
    const auto category = static_cast<BlockCategory>(c);
    if (name == category_name(category)) return category;
  }
  return std::nullopt;
}

AllocationHistory::AllocationHistory(std::size_t capacity) : capacity_(capacity) {
  if (capacity_ == 0) throw ValueError("AllocationHistory: capacity must be at least 1 event");
  ring_.reserve(std::min<std::size_t>(capacity_, std::size_t{1} << 16));
}

AllocationHistory::~AllocationHistory() { detach(); }

void AllocationHistory::attach(CachingAllocator& allocator) {
  detach();
  allocator.set_observer([this](const AllocatorEvent& e) { record(e); });
  std::lock_guard lock(mutex_);
  attached_ = &allocator;
}

void AllocationHistory::detach() {
  CachingAllocator* allocator = nullptr;
  {
    std::lock_guard lock(mutex_);
    allocator = attached_;
    attached_ = nullptr;
  }
  if (allocator) allocator->set_observer(nullptr);
}

void AllocationHistory::record(const AllocatorEvent& e) {
  const auto now = std::chrono::steady_clock::now() - start_;
  const HistoryEvent event{e.kind, std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(),
                           e.address, e.size, e.requested_size, e.stream, e.category, e.annotation};
  std::lock_guard lock(mutex_);
  if (ring_.size() < capacity_) {
    ring_.push_back(event);
    return;
  }
  ring_[next_] = event;
  next_ = (next_ + 1) % capacity_;
  ++dropped_;
}

std::vector<HistoryEvent> AllocationHistory::events() const {
  std::lock_guard lock(mutex_);
  std::vector<HistoryEvent> ordered(ring_.begin() + static_cast<std::ptrdiff_t>(next_), ring_.end());
  ordered.insert(ordered.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(next_));
  return ordered;
}

std::size_t AllocationHistory::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

void AllocationHistory::clear() {
  std::lock_guard lock(mutex_);
  ring_.clear();
  next_ = 0;
  dropped_ = 0;
}

}  // namespace sublet::memory
