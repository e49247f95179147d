// The waste split (memory/waste.h): one walk over every segment's blocks, reading only. Runs on
// request (waste(), memory_stats(), memory_summary(), an out-of-memory error) and when reserved
// memory reaches a new peak, which only happens on the cache-miss path.
#include <algorithm>

#include "memory/caching_allocator_impl.h"

namespace sublet::memory {
namespace {

// Allocated, or freed and still waiting for another stream's events: its bytes are not free yet.
bool is_live(const Block* b) { return b->allocated || b->pending_events > 0; }

}  // namespace

WasteSplit CachingAllocator::Impl::measure_waste(const BlockPool* request_pool, StreamHandle request_stream) const {
  WasteSplit w;
  w.reserved = reserved();
  const auto count_live = [&](const Block* b) {
    w.requested += b->requested_size;
    w.rounding += b->size - b->requested_size;
    // What size rounding alone added; a planned block can be smaller than the rounded size.
    const std::size_t rounded = std::min(CachingAllocator::round_size(b->requested_size, config), b->size);
    w.rounding_of_sizes += rounded - std::min(rounded, b->requested_size);
  };
  for (const Block& head : segments) {
    bool any_live = false;
    for (const Block* b = &head; b; b = b->next) any_live = any_live || is_live(b);
    const bool small = head.pool->is_small;
    for (const Block* b = &head; b; b = b->next) {
      if (is_live(b)) count_live(b);
      else if (any_live) w.holes.add(small, b->size);
      else w.free_segments.add(small, b->size);
    }
    if (!any_live && request_pool && (head.pool != request_pool || head.stream != request_stream))
      w.free_segments_elsewhere += head.size;
  }
  for (const auto& seg : expandable_segments) {
    const Block* last_live = nullptr;
    for (const Block* b = seg->head; b; b = b->next)
      if (is_live(b)) last_live = b;
    bool past_last_live = last_live == nullptr;
    for (const Block* b = seg->head; b; b = b->next) {
      if (is_live(b)) count_live(b);
      else if (past_last_live) w.mapped_unused += b->size;
      else w.holes.add(seg->pool->is_small, b->size);
      if (b == last_live) past_last_live = true;
    }
  }
  return w;
}

WasteSplit CachingAllocator::waste() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->measure_waste();
}

WasteSplit CachingAllocator::waste_at_peak() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->waste_at_peak;
}

std::map<std::string, std::int64_t> CachingAllocator::memory_stats() const {
  std::lock_guard lock(impl_->mutex);
  DeviceStats s = impl_->stats;
  impl_->active_stats.fill(s);
  std::map<std::string, std::int64_t> out = s.to_map();
  put_waste_stats(out, impl_->measure_waste(), impl_->waste_at_peak);
  return out;
}

}  // namespace sublet::memory
