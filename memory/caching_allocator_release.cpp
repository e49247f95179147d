// Giving cached memory back to the backend: whole free segments one at a time, everything on
// empty_cache() (and as the out-of-memory path's last resort), oversize blocks first when a
// request failed, and garbage collection of the longest-unused segments above the threshold.
// Reserved memory shrinks only here and in caching_allocator_expandable.cpp.
#include <algorithm>

#include "memory/caching_allocator_impl.h"

namespace sublet::memory {

// Returns one wholly free, non-expandable segment to the backend.
void CachingAllocator::Impl::release_segment(Block* b) {
  SUBLET_DEBUG_ASSERT(b->cached && !b->is_split() && !b->expandable,
                      "only a wholly free, cached, fixed segment goes back to the backend");
  settle_before_release(b);
  BlockPool& pool = *b->pool;
  pool.free_blocks.erase(*b);
  segments.erase(segments.iterator_to(*b));
  emit(AllocatorEventKind::SegmentFree, b, b->size);
  backend.deallocate(b->ptr, b->size);
  ++stats.num_device_free;
  stats.segment.decrease(pool.is_small, 1);
  stats.reserved_bytes.decrease(pool.is_small, static_cast<std::int64_t>(b->size));
  SUBLET_DEBUG_ASSERT(stats.reserved_bytes[StatType::All].current >= 0, "reserved bytes never go negative");
  if (b->size >= max_split()) stats.oversize_segments.decrease(1);
  arena.recycle(b);
}

std::vector<Block*> CachingAllocator::Impl::whole_free_segments(BlockPool& pool) {
  std::vector<Block*> result;
  pool.free_blocks.for_each([&](Block& b) {
    if (!b.is_split() && !b.expandable) result.push_back(&b);
  });
  return result;
}

// Everything cached goes back: waits for pending stream events first.
void CachingAllocator::Impl::release_all_cached() {
  synchronize_and_free_events();
  for (BlockPool* pool : {&large_pool, &small_pool})
    for (Block* b : whole_free_segments(*pool)) release_segment(b);
  for (auto& [id, p] : private_pools)
    if (p->small.released)
      for (BlockPool* pool : {&p->large, &p->small})
        for (Block* b : whole_free_segments(*pool)) release_segment(b);
  release_expandable_segments();
  drop_released_private_pools();
}

// With max_split_size set, oversize cached blocks go first: the smallest one that covers `size`,
// else the largest ones until `size` bytes are released.
bool CachingAllocator::Impl::release_oversize_blocks(StreamHandle stream, std::size_t size) {
  if (!config.max_split_size_set()) return false;
  std::vector<Block*> oversize;
  large_pool.free_blocks.for_each([&](Block& b) {
    if (b.stream == stream && b.size >= max_split() && !b.is_split() && !b.expandable) oversize.push_back(&b);
  });
  if (oversize.empty()) return false;
  auto covering = std::find_if(oversize.begin(), oversize.end(), [&](Block* b) { return b->size >= size; });
  if (covering != oversize.end()) {
    release_segment(*covering);
    return true;
  }
  std::size_t released = 0;
  while (!oversize.empty() && released < size) {
    released += oversize.back()->size;
    release_segment(oversize.back());
    oversize.pop_back();
  }
  return true;
}

// Above garbage_collection_threshold of the memory limit, reclaims the cached segments that have
// gone unused longest (age counted in pool lookups), oldest first, until below it.
void CachingAllocator::Impl::collect_garbage() {
  if (memory_limit == 0 || config.garbage_collection_threshold <= 0.0) return;
  const auto threshold = static_cast<std::size_t>(config.garbage_collection_threshold * static_cast<double>(memory_limit));
  if (reserved() <= threshold) return;
  const std::size_t target = reserved() - threshold;
  std::size_t reclaimed = 0;
  while (reclaimed < target) {
    // Large-pool segments only, as PyTorch's garbage_collect_cached_blocks: small segments are
    // 2 MiB each and cheap to keep.
    std::vector<Block*> candidates = whole_free_segments(large_pool);
    if (candidates.empty()) return;
    double total_age = 0;
    for (Block* b : candidates) total_age += static_cast<double>(b->pool->lookups - b->free_stamp);
    const double average_age = total_age / static_cast<double>(candidates.size());
    std::sort(candidates.begin(), candidates.end(), [](Block* a, Block* b) {
      return a->pool->lookups - a->free_stamp > b->pool->lookups - b->free_stamp;
    });
    for (Block* b : candidates) {
      if (reclaimed >= target) break;
      if (static_cast<double>(b->pool->lookups - b->free_stamp) < average_age) break;
      reclaimed += b->size;
      release_segment(b);
    }
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(impl_->mutex);
  impl_->emit(AllocatorEventKind::CacheEmptied);
  impl_->release_all_cached();
}

}  // namespace sublet::memory
