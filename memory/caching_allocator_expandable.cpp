// Expandable segments: one virtual address range per (pool, stream), reserved once and backed
// with physical memory from its start as it grows, so that a growing workload makes no new
// segments (and no holes between them). Blocks cover exactly the mapped prefix; free tails are
// unmapped when the cache is released.
#include <algorithm>

#include "memory/caching_allocator_impl.h"

namespace sublet::memory {

using detail::round_up;

ExpandableSegment* CachingAllocator::Impl::expandable_segment_for(BlockPool& pool, StreamHandle stream) {
  for (auto& seg : expandable_segments)
    if (seg->pool == &pool && seg->stream == stream) return seg.get();
  VirtualMemory* vm = backend.virtual_memory();
  const std::size_t range = round_up(std::max(backend.memory_info().total_bytes, vm->granularity()), vm->granularity());
  void* base = vm->reserve(range);
  if (!base) return nullptr;
  auto seg = std::make_unique<ExpandableSegment>();
  seg->base = base;
  seg->reserved_bytes = range;
  seg->stream = stream;
  seg->pool = &pool;
  expandable_segments.push_back(std::move(seg));
  return expandable_segments.back().get();
}

Block* CachingAllocator::Impl::last_block(ExpandableSegment& seg) {
  Block* b = seg.head;
  while (b && b->next) b = b->next;
  return b;
}

// Maps more physical memory at the end of the stream's expandable segment so that a block of
// `size` fits at its tail. Returns that tail block, out of the free set.
Block* CachingAllocator::Impl::grow_expandable(BlockPool& pool, StreamHandle stream, std::size_t size) {
  VirtualMemory* vm = backend.virtual_memory();
  ExpandableSegment* seg = expandable_segment_for(pool, stream);
  if (!seg) return nullptr;
  Block* tail = last_block(*seg);
  const bool tail_free = is_free_and_cached(tail);
  const std::size_t have = tail_free ? tail->size : 0;
  const std::size_t map_bytes = round_up(size - have, vm->granularity());
  if (seg->mapped_bytes + map_bytes > seg->reserved_bytes) return nullptr;
  if (!within_memory_limit(map_bytes)) return nullptr;
  void* at = static_cast<char*>(seg->base) + seg->mapped_bytes;
  if (!vm->map(at, map_bytes)) return nullptr;
  ++stats.num_device_alloc;
  if (seg->mapped_bytes == 0) stats.segment.increase(pool.is_small, 1);
  seg->mapped_bytes += map_bytes;
  count_new_reserved(pool.is_small, map_bytes);
  Block* b;
  if (tail_free) {
    pool.free_blocks.erase(*tail);
    tail->size += map_bytes;
    b = tail;
  } else {
    b = arena.make();
    b->ptr = at;
    b->size = map_bytes;
    b->stream = stream;
    b->pool = &pool;
    b->expandable = seg;
    b->prev = tail;
    if (tail) tail->next = b; else seg->head = b;
  }
  SUBLET_DEBUG_ASSERT(static_cast<char*>(b->ptr) + b->size == static_cast<char*>(seg->base) + seg->mapped_bytes,
                      "the blocks of an expandable segment cover exactly its mapped prefix");
  emit(AllocatorEventKind::SegmentMap, reinterpret_cast<std::uintptr_t>(at), map_bytes, 0, stream);
  return b;
}

// Unmaps the free, granule-aligned tail of an expandable segment.
void CachingAllocator::Impl::shrink_expandable(ExpandableSegment& seg) {
  Block* tail = last_block(seg);
  if (!is_free_and_cached(tail)) return;
  VirtualMemory* vm = backend.virtual_memory();
  const std::size_t tail_offset = static_cast<std::size_t>(static_cast<char*>(tail->ptr) - static_cast<char*>(seg.base));
  const std::size_t keep = round_up(tail_offset, vm->granularity());
  if (keep >= seg.mapped_bytes) return;
  const std::size_t unmap_bytes = seg.mapped_bytes - keep;
  settle_before_release(tail);
  BlockPool& pool = *seg.pool;
  pool.free_blocks.erase(*tail);
  void* at = static_cast<char*>(seg.base) + keep;
  emit(AllocatorEventKind::SegmentUnmap, reinterpret_cast<std::uintptr_t>(at), unmap_bytes, 0, seg.stream);
  vm->unmap(at, unmap_bytes);
  ++stats.num_device_free;
  seg.mapped_bytes = keep;
  stats.reserved_bytes.decrease(pool.is_small, static_cast<std::int64_t>(unmap_bytes));
  SUBLET_DEBUG_ASSERT(stats.reserved_bytes[StatType::All].current >= 0, "reserved bytes never go negative");
  tail->size -= unmap_bytes;
  if (tail->size > 0) {
    pool.free_blocks.insert(*tail);
    return;
  }
  if (tail->prev) tail->prev->next = nullptr; else seg.head = nullptr;
  arena.recycle(tail);
  if (seg.mapped_bytes == 0) stats.segment.decrease(pool.is_small, 1);
}

void CachingAllocator::Impl::release_expandable_segments() {
  VirtualMemory* vm = backend.virtual_memory();
  for (auto it = expandable_segments.begin(); it != expandable_segments.end();) {
    ExpandableSegment& seg = **it;
    if (!seg.pool->reclaimable()) {  // a captured graph may still use its free blocks
      ++it;
      continue;
    }
    shrink_expandable(seg);
    if (seg.mapped_bytes == 0) {
      vm->release(seg.base, seg.reserved_bytes);
      it = expandable_segments.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace sublet::memory
