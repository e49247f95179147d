// Reading the allocator without changing it: statistics, the snapshot of segments and blocks
// (what memory_viz shows), the largest free block and fragmentation. Resetting peaks and
// accumulated counts is here too: it changes only what is read.
#include <algorithm>

#include "memory/caching_allocator_impl.h"

namespace sublet::memory {

std::size_t CachingAllocator::Impl::largest_free() const {
  std::size_t largest = 0;
  for (const BlockPool* pool : {&small_pool, &large_pool})
    pool->free_blocks.for_each_unordered([&](const Block& b) { largest = std::max(largest, b.size); });
  return largest;
}

std::size_t CachingAllocator::Impl::free_cached_bytes() const {
  std::size_t total = 0;
  for (const BlockPool* pool : {&small_pool, &large_pool})
    pool->free_blocks.for_each_unordered([&](const Block& b) { total += b.size; });
  return total;
}

double CachingAllocator::Impl::fragmentation() const {
  const std::size_t free_bytes = free_cached_bytes();
  if (free_bytes == 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free()) / static_cast<double>(free_bytes);
}

SegmentInfo CachingAllocator::Impl::describe(const Block* head, bool expandable) const {
  SegmentInfo s;
  s.address = reinterpret_cast<std::uintptr_t>(head->ptr);
  s.is_small_pool = head->pool->is_small;
  s.is_expandable = expandable;
  s.private_pool_id = head->pool->private_pool_id;
  s.stream = head->stream;
  for (const Block* b = head; b; b = b->next) {
    BlockInfo info;
    info.address = reinterpret_cast<std::uintptr_t>(b->ptr);
    info.size = b->size;
    info.requested_size = b->requested_size;
    info.category = b->category;
    info.annotation = b->annotation;
    info.state = b->allocated            ? BlockInfo::State::ActiveAllocated
                 : b->pending_events > 0 ? BlockInfo::State::ActivePending
                                         : BlockInfo::State::Inactive;
    s.total_size += b->size;
    if (b->allocated) s.allocated_size += b->size;
    if (b->allocated || b->pending_events > 0) s.active_size += b->size;
    s.requested_size += b->requested_size;
    s.blocks.push_back(info);
  }
  return s;
}

std::size_t CachingAllocator::memory_allocated() const {
  std::lock_guard lock(impl_->mutex);
  return static_cast<std::size_t>(impl_->stats.allocated_bytes[StatType::All].current);
}
std::size_t CachingAllocator::memory_reserved() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->reserved();
}
std::size_t CachingAllocator::max_memory_allocated() const {
  std::lock_guard lock(impl_->mutex);
  return static_cast<std::size_t>(impl_->stats.allocated_bytes[StatType::All].peak);
}
std::size_t CachingAllocator::max_memory_reserved() const {
  std::lock_guard lock(impl_->mutex);
  return static_cast<std::size_t>(impl_->stats.reserved_bytes[StatType::All].peak);
}
void CachingAllocator::reset_peak_memory_stats() {
  std::lock_guard lock(impl_->mutex);
  impl_->emit(AllocatorEventKind::PeaksReset);
  impl_->stats.reset_peak();
  impl_->active_stats.reset_peak(impl_->stats);
  impl_->capture_peak_waste();
}
void CachingAllocator::reset_accumulated_memory_stats() {
  std::lock_guard lock(impl_->mutex);
  impl_->stats.reset_accumulated();
  impl_->active_stats.reset_accumulated();
}
DeviceStats CachingAllocator::stats() const {
  std::lock_guard lock(impl_->mutex);
  DeviceStats s = impl_->stats;
  impl_->active_stats.fill(s);
  return s;
}
std::size_t CachingAllocator::largest_free_block() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->largest_free();
}
double CachingAllocator::fragmentation() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->fragmentation();
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<SegmentInfo> result;
  for (const Block& head : impl_->segments) result.push_back(impl_->describe(&head, false));
  for (const auto& seg : impl_->expandable_segments)
    if (seg->head) result.push_back(impl_->describe(seg->head, true));
  std::sort(result.begin(), result.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return result;
}

}  // namespace sublet::memory
