// The core of the caching allocator: pools, finding a free block, splitting it, merging a freed
// block with its free neighbours; allocate() and free(), whose cache hits run entirely in this
// file. The other jobs are listed in caching_allocator_impl.h.
#include "memory/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "core/errors.h"
#include "memory/annotation.h"
#include "memory/caching_allocator_impl.h"

namespace sublet::memory {
namespace {

using detail::round_up;

// Rounds `size` up to the next of `divisions` equal steps between two powers of two.
// E.g. divisions 4: 1200 MiB -> between 1024 and 2048 the steps are 1280, 1536, 1792 -> 1280.
std::size_t round_to_power2_division(std::size_t size, std::size_t divisions) {
  if (std::has_single_bit(size)) return size;
  const std::size_t floor_power = std::bit_floor(size);
  const std::size_t step = floor_power / divisions;
  if (step == 0) return floor_power << 1;
  const std::size_t rounded_down = size & ~(step - 1);
  return rounded_down == size ? size : rounded_down + step;
}

[[maybe_unused]] bool contiguous(const Block* lower, const Block* upper) {  // debug checks
  return static_cast<const char*>(lower->ptr) + lower->size == upper->ptr;
}

}  // namespace

std::size_t CachingAllocator::round_size(std::size_t bytes, const AllocatorConfig& config) {
  if (bytes <= kMinBlockSize) return kMinBlockSize;
  // Small sizes without divisions (the common case) skip the interval lookup.
  if (bytes <= kSmallSize && config.roundup_power2_divisions[0] <= 1) return round_up(bytes, kMinBlockSize);
  const std::size_t divisions = config.divisions_for(bytes);
  if (divisions > 1 && bytes > kMinBlockSize * divisions) return round_to_power2_division(bytes, divisions);
  return round_up(bytes, kMinBlockSize);
}

std::size_t CachingAllocator::segment_size_for(std::size_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded_bytes, kRoundLarge);
}

// ---- finding and making blocks -----------------------------------------------------------------

inline Block* CachingAllocator::Impl::take_free_block(BlockPool& pool, StreamHandle stream, std::size_t size) {
  ++pool.lookups;
  // Oversize blocks are kept for oversize requests, and only for ones close to their size.
  Block* b = pool.free_blocks.take_best_fit(stream, size, [&](const Block& candidate) {
    if (size < max_split()) return candidate.size < max_split();
    return candidate.size < size + kLargeBuffer;
  });
  SUBLET_DEBUG_ASSERT(!b || (b->stream == stream && b->pool == &pool && !b->allocated && !b->cached && b->size >= size),
                      "a free block taken from the bins is of the asked stream and pool, free, and large enough");
  return b;
}

Block* CachingAllocator::Impl::new_segment(BlockPool& pool, StreamHandle stream, std::size_t segment_bytes) {
  if (!within_memory_limit(segment_bytes)) return nullptr;
  void* ptr = backend.allocate(segment_bytes);
  if (!ptr) return nullptr;
  ++stats.num_device_alloc;
  Block* b = arena.make();
  b->ptr = ptr;
  b->size = segment_bytes;
  b->stream = stream;
  b->pool = &pool;
  segments.push_back(*b);
  stats.segment.increase(pool.is_small, 1);
  count_new_reserved(pool.is_small, segment_bytes);
  if (segment_bytes >= max_split()) stats.oversize_segments.increase(1);
  emit(AllocatorEventKind::SegmentAlloc, b, segment_bytes);
  return b;
}

Block* CachingAllocator::Impl::new_memory(BlockPool& pool, StreamHandle stream, std::size_t size) {
  if (!config.caching) return new_segment(pool, stream, size);  // one exact segment per request
  if (config.expandable_segments && backend.virtual_memory()) return grow_expandable(pool, stream, size);
  return new_segment(pool, stream, segment_size_for(size));
}

inline bool CachingAllocator::Impl::should_split(const Block* b, std::size_t size) const {
  const std::size_t remaining = b->size - size;
  if (b->pool->is_small || b->expandable) return remaining >= kMinBlockSize;
  return size < max_split() && remaining > kSmallSize;
}

// Cuts `b` to `size`; the remainder after it becomes a free block. `b` stays the caller's block.
inline void CachingAllocator::Impl::split(Block* b, std::size_t size) {
  const bool was_split = b->is_split();
  Block* rest = cut_after(b, size);
  SUBLET_DEBUG_ASSERT(contiguous(b, rest) && (!rest->next || contiguous(rest, rest->next)),
                      "a split keeps the blocks of its segment contiguous");
  b->pool->free_blocks.insert(*rest);
  if (b->expandable) return;  // as PyTorch: expandable segments do not count inactive splits
  if (was_split) {
    // An inactive split block shrinks by `size`; the count of inactive splits is unchanged.
    stats.inactive_split_bytes.decrease(b->pool->is_small, static_cast<std::int64_t>(size));
  } else {
    stats.inactive_split_bytes.increase(b->pool->is_small, static_cast<std::int64_t>(rest->size));
    stats.inactive_split.increase(b->pool->is_small, 1);
  }
}

// ---- merging freed blocks ----------------------------------------------------------------------

void CachingAllocator::Impl::return_block(Block* b, bool was_pending) {
  SUBLET_DEBUG_ASSERT(!b->allocated && !b->cached && b->pending_events == 0,
                      "a block rejoining the free set is freed, not yet cached, and waits for no stream");
  const bool small = counts_as_small(*b);
  const std::int64_t original_size = static_cast<std::int64_t>(b->size);
  const std::int64_t requested = static_cast<std::int64_t>(b->requested_size);
  emit(AllocatorEventKind::FreeCompleted, b, b->size);
  std::int64_t inactive_blocks_change = 0;
  std::int64_t inactive_bytes_change = 0;
  if (is_free_and_cached(b->prev)) {
    Block* lower = b->prev;
    inactive_blocks_change -= 1;
    inactive_bytes_change -= static_cast<std::int64_t>(lower->size);
    b->pool->free_blocks.erase(*lower);
    absorb_next(lower);
    b = lower;
  }
  if (is_free_and_cached(b->next)) {
    Block* upper = b->next;
    inactive_blocks_change -= 1;
    inactive_bytes_change -= static_cast<std::int64_t>(upper->size);
    b->pool->free_blocks.erase(*upper);
    absorb_next(b);
  }
  b->allocated = false;
  b->requested_size = 0;
  b->category = BlockCategory::Unknown;
  b->annotation = 0;
  b->free_stamp = b->pool->lookups;
  b->pool->free_blocks.insert(*b);
  if (b->is_split()) {
    inactive_blocks_change += 1;
    inactive_bytes_change += static_cast<std::int64_t>(b->size);
  }
  if (!b->expandable) {
    apply_change(stats.inactive_split, small, inactive_blocks_change);
    apply_change(stats.inactive_split_bytes, small, inactive_bytes_change);
  }
  if (was_pending) active_stats.end_pending(small, original_size);
  stats.requested_bytes.decrease(small, requested);
  SUBLET_DEBUG_ASSERT(stats.requested_bytes[StatType::All].current >= 0, "requested bytes never go negative");
  // Never during a capture: cudaFree would synchronise the device and invalidate it (as PyTorch,
  // which releases nothing while captures are underway). A released pool's free segments then
  // wait for the next empty_cache().
  const bool give_back = (!config.caching || (b->pool->private_pool_id != 0 && b->pool->released)) && captures.empty();
  if (give_back && !b->is_split() && !b->expandable) {
    release_segment(b);
    drop_released_private_pools();
  }
}

// `lower` takes over its next neighbour's bytes; the neighbour's Block is recycled.
inline void CachingAllocator::Impl::absorb_next(Block* lower) {
  Block* upper = lower->next;
  SUBLET_DEBUG_ASSERT(!lower->allocated && !upper->allocated && lower->pending_events == 0 && upper->pending_events == 0,
                      "merged neighbours are both free");
  SUBLET_DEBUG_ASSERT(lower->pool == upper->pool && lower->stream == upper->stream &&
                          lower->expandable == upper->expandable && contiguous(lower, upper),
                      "merged neighbours are contiguous and of the same pool, stream and segment");
  lower->size += upper->size;
  if (!upper->reuse_after.empty()) [[unlikely]] {
    lower->reuse_after.insert(lower->reuse_after.end(), upper->reuse_after.begin(), upper->reuse_after.end());
    upper->reuse_after.clear();
  }
  lower->next = upper->next;
  if (lower->next) lower->next->prev = lower;
  arena.recycle(upper);
}

bool CachingAllocator::Impl::owns_pool(const BlockPool* pool) const {
  if (pool == &small_pool || pool == &large_pool) return true;
  for (const auto& [id, p] : private_pools)
    if (pool == &p->small || pool == &p->large) return true;
  return false;
}

// ---- the public face ---------------------------------------------------------------------------

CachingAllocator::CachingAllocator(std::unique_ptr<Backend> backend, AllocatorConfig config)
    : backend_(std::move(backend)), config_(config), impl_(std::make_unique<Impl>(*backend_, config_)) {
  config_.validate();
  if (config_.expandable_segments && !backend_->virtual_memory())
    throw ConfigError("expandable_segments:True is not supported by the " + backend_->name() +
                      " backend (it has no virtual memory API)");
  impl_->stats.max_split_size = config_.max_split_size_set() ? static_cast<std::int64_t>(config_.max_split_size) : -1;
}

CachingAllocator::~CachingAllocator() {
  // Whatever callers still hold is lost with the allocator; give back what is cached.
  std::lock_guard lock(impl_->mutex);
  impl_->release_all_cached();
  // Segments that still hold callers' blocks stay in the segment list and their free blocks in
  // the bins. Those intrusive containers unlink their Blocks when destroyed, after the arena that
  // owns the Blocks (members die in reverse order): unlink them now.
  for (BlockPool* pool : {&impl_->small_pool, &impl_->large_pool}) {
    std::vector<Block*> cached;
    pool->free_blocks.for_each([&](Block& b) { cached.push_back(&b); });
    for (Block* b : cached) pool->free_blocks.erase(*b);
  }
  impl_->segments.clear();
}

Block* CachingAllocator::allocate(std::size_t bytes, StreamHandle stream, BlockCategory category) {
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  if (bytes > Impl::kLargestRequest) s.throw_out_of_memory(bytes, bytes, stream);
  if (!s.pending_events.empty()) [[unlikely]] s.process_events();
  const std::size_t size = round_size(bytes, config_);
  BlockPool& pool = s.pool_for(size, stream);
  const bool private_pool = pool.private_pool_id != 0;
  Block* b = private_pool ? s.take_planned_block(pool, bytes) : nullptr;  // exact size, stats done
  if (!b) [[likely]] {
    b = config_.caching ? s.take_free_block(pool, stream, size) : nullptr;
    if (!b) [[unlikely]] b = s.allocate_new_memory(pool, stream, size, bytes);  // throws OutOfMemoryError
    if (!b->reuse_after.empty()) [[unlikely]] s.wait_before_reuse(b, stream);
    const bool was_split = b->is_split() && !b->expandable;
    if (s.should_split(b, size)) {
      s.split(b, size);
    } else if (was_split) {
      // An inactive split block becomes active whole.
      s.stats.inactive_split.decrease(pool.is_small, 1);
      s.stats.inactive_split_bytes.decrease(pool.is_small, static_cast<std::int64_t>(b->size));
    }
  }
  SUBLET_DEBUG_ASSERT(b->size >= bytes && !b->allocated && !b->cached,
                      "allocate hands out a free block of at least the requested size");
  b->allocated = true;
  b->requested_size = bytes;
  b->category = category;
  b->annotation = current_annotation();
  const bool small = Impl::counts_as_small(*b);
  const auto block_size = static_cast<std::int64_t>(b->size);
  s.stats.allocation.increase(small, 1);
  s.stats.allocated_bytes.increase(small, block_size);
  s.stats.requested_bytes.increase(small, static_cast<std::int64_t>(bytes));
  if (b->size >= s.max_split()) s.stats.oversize_allocations.increase(1);
  s.active_stats.on_allocate(s.stats, small);
  s.emit(AllocatorEventKind::Alloc, b, b->size);
  if (private_pool) [[unlikely]] s.record_request(b, bytes);
  if (s.peak_waste_due) [[unlikely]] s.capture_peak_waste();
  return b;
}

void CachingAllocator::free(Block* block) {
  if (!block) return;
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  if (!block->allocated) throw Error("CachingAllocator::free: block at " + std::to_string(reinterpret_cast<std::uintptr_t>(block->ptr)) + " is not allocated (double free?)");
  SUBLET_DEBUG_ASSERT(s.owns_pool(block->pool), "a freed block belongs to one of this allocator's pools");
  const bool small = Impl::counts_as_small(*block);
  // Step 1: the caller's bytes are released at once.
  block->allocated = false;
  s.stats.allocation.decrease(small, 1);
  s.stats.allocated_bytes.decrease(small, static_cast<std::int64_t>(block->size));
  SUBLET_DEBUG_ASSERT(s.stats.allocated_bytes[StatType::All].current >= 0 && s.stats.allocation[StatType::All].current >= 0,
                      "allocated bytes and blocks never go negative");
  if (block->size >= s.max_split()) s.stats.oversize_allocations.decrease(1);
  s.emit(AllocatorEventKind::FreeRequested, block, block->size);
  if (block->pool->private_pool_id != 0) [[unlikely]] s.record_free(block);
  // Step 2: the block returns to the free set, now or once other streams are done with it.
  if (!block->stream_uses.empty() && s.backend.stream_events()) [[unlikely]] {
    if (s.reuse_is_stream_ordered(block)) {
      s.order_reuse_after_streams(block);
      s.return_block(block, false);
      return;
    }
    s.defer_until_streams_done(block, small);
    return;
  }
  block->stream_uses.clear();
  s.return_block(block, false);
}

void CachingAllocator::set_category(Block* block, BlockCategory category) {
  std::lock_guard lock(impl_->mutex);
  block->category = category;
}

void CachingAllocator::set_memory_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw ConfigError("set_memory_fraction: expected a fraction in (0, 1], got " + std::to_string(fraction));
  const std::size_t total = backend_->memory_info().total_bytes;
  std::lock_guard lock(impl_->mutex);
  impl_->memory_limit = static_cast<std::size_t>(fraction * static_cast<double>(total));
}

void CachingAllocator::set_config(const AllocatorConfig& config) {
  config.validate();
  if (config.expandable_segments && !backend_->virtual_memory())
    throw ConfigError("expandable_segments:True is not supported by the " + backend_->name() + " backend");
  std::lock_guard lock(impl_->mutex);
  if (impl_->stats.allocation[StatType::All].current != 0)
    throw ConfigError("set_config: " + std::to_string(impl_->stats.allocation[StatType::All].current) +
                      " blocks are still allocated; change the allocator configuration only while none are");
  impl_->release_all_cached();
  config_ = config;
  impl_->stats.max_split_size = config_.max_split_size_set() ? static_cast<std::int64_t>(config_.max_split_size) : -1;
}

void CachingAllocator::set_observer(AllocatorObserver observer) {
  std::lock_guard lock(impl_->mutex);
  impl_->observer = std::move(observer);
}

}  // namespace sublet::memory
