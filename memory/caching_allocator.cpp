#include "memory/caching_allocator.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

#include "memory/active_stats.h"
#include "memory/allocator_mutex.h"
#include "memory/annotation.h"
#include "memory/block_pool.h"
#include "core/errors.h"
#include "memory/oom_message.h"

namespace sublet::memory {
namespace {

// Requests above this cannot be rounded or segmented without overflow; no device has this much.
constexpr std::size_t kLargestRequest = std::size_t{1} << 60;

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

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

// Recycles Block objects so that splitting on a cache hit allocates nothing on the heap once
// the arena has warmed up. Free Blocks are chained through their `next` field.
class BlockArena {
 public:
  ~BlockArena() = default;
  Block* make() {
    if (!free_list_) grow();
    Block* b = free_list_;
    free_list_ = b->next;
    b->next = nullptr;
    return b;
  }
  void recycle(Block* b) {
    b->ptr = nullptr;
    b->size = b->requested_size = 0;
    b->stream = nullptr;
    b->pool = nullptr;
    b->prev = nullptr;
    b->allocated = false;
    b->pending_events = 0;
    b->free_stamp = 0;
    b->expandable = nullptr;
    b->category = BlockCategory::Unknown;
    b->annotation = 0;
    b->stream_uses.clear();
    b->next = free_list_;
    free_list_ = b;
  }

 private:
  static constexpr std::size_t kChunk = 256;
  [[gnu::noinline]] void grow() {  // rare: keeps make() small enough to inline
    chunks_.push_back(std::make_unique<Block[]>(kChunk));
    Block* chunk = chunks_.back().get();
    for (std::size_t i = 0; i < kChunk; ++i) {
      chunk[i].next = free_list_;
      free_list_ = &chunk[i];
    }
  }
  std::vector<std::unique_ptr<Block[]>> chunks_;
  Block* free_list_ = nullptr;
};

bool is_free_and_cached(const Block* b) {
  return b != nullptr && b->cached;
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

struct CachingAllocator::Impl {
  Impl(Backend& backend_ref, const AllocatorConfig& config_ref) : backend(backend_ref), config(config_ref) {}

  Backend& backend;
  const AllocatorConfig& config;
  mutable AllocatorMutex mutex;
  BlockPool small_pool{true};
  BlockPool large_pool{false};
  SegmentList segments;  // head block of every non-expandable segment
  std::vector<std::unique_ptr<ExpandableSegment>> expandable_segments;
  BlockArena arena;
  DeviceStats stats;          // all but the active families, which active_stats derives
  ActiveStats active_stats;
  struct PendingEvent { EventHandle event; Block* block; };
  std::vector<PendingEvent> pending_events;
  std::size_t memory_limit = 0;  // 0 = no per-process fraction set
  AllocatorObserver observer;
  struct PrivatePool {
    explicit PrivatePool(std::uint64_t id) : small(true, id), large(false, id) {}
    BlockPool small;
    BlockPool large;
  };
  std::map<std::uint64_t, std::unique_ptr<PrivatePool>> private_pools;
  struct CaptureTarget { StreamHandle stream; PrivatePool* pool; };
  std::vector<CaptureTarget> captures;  // streams whose allocations go to a private pool
  std::uint64_t next_private_pool_id = 1;

  // With expandable segments a stream's requests of every size share one segment (the large
  // pool's): each separate segment leaves up to a page of its mapped tail unused and its own holes,
  // and in replays of recorded ResNet steps the small pool's own segment cost 2-7% of peak
  // reserved memory (resnet18 1.047 -> 1.027, resnet50 1.108 -> 1.040 reserved / allocated).
  // Small requests still count in the small pool's allocation statistics (counts_as_small).
  bool one_segment_per_stream() const { return config.caching && config.expandable_segments; }
  static bool counts_as_small(const Block& b) { return b.pool->is_small || (b.expandable && b.size <= kSmallSize); }

  BlockPool& pool_for(std::size_t rounded, StreamHandle stream) {
    const bool small = rounded <= kSmallSize && !one_segment_per_stream();
    for (const CaptureTarget& c : captures)
      if (c.stream == stream) return small ? c.pool->small : c.pool->large;
    return small ? small_pool : large_pool;
  }

  PrivatePool& private_pool(std::uint64_t id) {
    auto it = private_pools.find(id);
    if (it == private_pools.end()) throw Error("CachingAllocator: no private pool " + std::to_string(id));
    return *it->second;
  }

  bool pool_is_empty(const BlockPool& pool) const {
    for (const Block& head : segments)
      if (head.pool == &pool) return false;
    for (const auto& seg : expandable_segments)
      if (seg->pool == &pool) return false;
    return true;
  }

  // A released private pool disappears once its last segment has gone back.
  void drop_released_private_pools() {
    for (auto it = private_pools.begin(); it != private_pools.end();) {
      PrivatePool& p = *it->second;
      if (p.small.released && pool_is_empty(p.small) && pool_is_empty(p.large)) it = private_pools.erase(it);
      else ++it;
    }
  }
  std::size_t max_split() const { return config.max_split_size; }
  std::size_t reserved() const { return static_cast<std::size_t>(stats.reserved_bytes[StatType::All].current); }

  void notify(AllocatorEventKind kind, const Block* b, std::size_t size) {
    if (!observer) return;
    observer(AllocatorEvent{kind, reinterpret_cast<std::uintptr_t>(b->ptr), size,
                            b->requested_size, b->stream, b->category, b->annotation});
  }
  // An event about the allocator as a whole (CacheEmptied, PeaksReset), not about one block.
  void notify_marker(AllocatorEventKind kind) {
    if (observer) observer(AllocatorEvent{kind, 0, 0, 0, nullptr, BlockCategory::Unknown, 0});
  }

  // ---- finding and making blocks ---------------------------------------------------------

  Block* take_free_block(BlockPool& pool, StreamHandle stream, std::size_t size) {
    ++pool.lookups;
    // Oversize blocks are kept for oversize requests, and only for ones close to their size.
    return pool.free_blocks.take_best_fit(stream, size, [&](const Block& b) {
      if (size < max_split()) return b.size < max_split();
      return b.size < size + kLargeBuffer;
    });
  }

  bool within_memory_limit(std::size_t extra) const {
    return memory_limit == 0 || reserved() + extra <= memory_limit;
  }

  void count_new_reserved(bool small, std::size_t bytes) {
    stats.reserved_bytes.increase(small, static_cast<std::int64_t>(bytes));
  }

  Block* new_segment(BlockPool& pool, StreamHandle stream, std::size_t segment_bytes) {
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
    notify(AllocatorEventKind::SegmentAlloc, b, segment_bytes);
    return b;
  }

  ExpandableSegment* expandable_segment_for(BlockPool& pool, StreamHandle stream) {
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

  static Block* last_block(ExpandableSegment& seg) {
    Block* b = seg.head;
    while (b && b->next) b = b->next;
    return b;
  }

  // Maps more physical memory at the end of the stream's expandable segment so that a block
  // of `size` fits at its tail. Returns that tail block, out of the free set.
  Block* grow_expandable(BlockPool& pool, StreamHandle stream, std::size_t size) {
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
    AllocatorEvent e{AllocatorEventKind::SegmentMap, reinterpret_cast<std::uintptr_t>(at), map_bytes, 0, stream,
                     BlockCategory::Unknown, 0};
    if (observer) observer(e);
    return b;
  }

  Block* new_memory(BlockPool& pool, StreamHandle stream, std::size_t size) {
    if (!config.caching) return new_segment(pool, stream, size);  // one exact segment per request
    if (config.expandable_segments && backend.virtual_memory()) return grow_expandable(pool, stream, size);
    return new_segment(pool, stream, segment_size_for(size));
  }

  bool should_split(const Block* b, std::size_t size) const {
    const std::size_t remaining = b->size - size;
    if (b->pool->is_small || b->expandable) return remaining >= kMinBlockSize;
    return size < max_split() && remaining > kSmallSize;
  }

  // Cuts `b` to `size`; the remainder after it becomes a free block. Returns the caller's block.
  void split(Block* b, std::size_t size) {
    const bool was_split = b->is_split();
    Block* rest = arena.make();
    rest->ptr = static_cast<char*>(b->ptr) + size;
    rest->size = b->size - size;
    rest->stream = b->stream;
    rest->pool = b->pool;
    rest->expandable = b->expandable;
    rest->prev = b;
    rest->next = b->next;
    if (rest->next) rest->next->prev = rest;
    b->next = rest;
    b->size = size;
    rest->free_stamp = b->pool->lookups;
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

  // ---- releasing ----------------------------------------------------------------------

  // Step 2 of a release: the block rejoins the free set, merged with free neighbours.
  // `was_pending`: it waited for other streams' events since its caller freed it.
  void return_block(Block* b, bool was_pending) {
    const bool small = counts_as_small(*b);
    const std::int64_t original_size = static_cast<std::int64_t>(b->size);
    const std::int64_t requested = static_cast<std::int64_t>(b->requested_size);
    notify(AllocatorEventKind::FreeCompleted, b, b->size);
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
    const bool give_back = !config.caching || (b->pool->private_pool_id != 0 && b->pool->released);
    if (give_back && !b->is_split() && !b->expandable) {
      release_segment(b);
      drop_released_private_pools();
    }
  }

  static void apply_change(StatArray& stat, bool small, std::int64_t change) {
    if (change > 0) stat.increase(small, change);
    if (change < 0) stat.decrease(small, -change);
  }

  // `lower` takes over its next neighbour's bytes; the neighbour's Block is recycled.
  void absorb_next(Block* lower) {
    Block* upper = lower->next;
    lower->size += upper->size;
    lower->next = upper->next;
    if (lower->next) lower->next->prev = lower;
    arena.recycle(upper);
  }

  // Returns one wholly free, non-expandable segment to the backend.
  void release_segment(Block* b) {
    BlockPool& pool = *b->pool;
    pool.free_blocks.erase(*b);
    segments.erase(segments.iterator_to(*b));
    notify(AllocatorEventKind::SegmentFree, b, b->size);
    backend.deallocate(b->ptr, b->size);
    ++stats.num_device_free;
    stats.segment.decrease(pool.is_small, 1);
    stats.reserved_bytes.decrease(pool.is_small, static_cast<std::int64_t>(b->size));
    if (b->size >= max_split()) stats.oversize_segments.decrease(1);
    arena.recycle(b);
  }

  // Unmaps the free, granule-aligned tail of an expandable segment.
  void shrink_expandable(ExpandableSegment& seg) {
    Block* tail = last_block(seg);
    if (!is_free_and_cached(tail)) return;
    VirtualMemory* vm = backend.virtual_memory();
    const std::size_t tail_offset = static_cast<std::size_t>(static_cast<char*>(tail->ptr) - static_cast<char*>(seg.base));
    const std::size_t keep = round_up(tail_offset, vm->granularity());
    if (keep >= seg.mapped_bytes) return;
    const std::size_t unmap_bytes = seg.mapped_bytes - keep;
    BlockPool& pool = *seg.pool;
    pool.free_blocks.erase(*tail);
    void* at = static_cast<char*>(seg.base) + keep;
    AllocatorEvent e{AllocatorEventKind::SegmentUnmap, reinterpret_cast<std::uintptr_t>(at), unmap_bytes, 0,
                     seg.stream, BlockCategory::Unknown, 0};
    if (observer) observer(e);
    vm->unmap(at, unmap_bytes);
    ++stats.num_device_free;
    seg.mapped_bytes = keep;
    stats.reserved_bytes.decrease(pool.is_small, static_cast<std::int64_t>(unmap_bytes));
    tail->size -= unmap_bytes;
    if (tail->size > 0) {
      pool.free_blocks.insert(*tail);
      return;
    }
    if (tail->prev) tail->prev->next = nullptr; else seg.head = nullptr;
    arena.recycle(tail);
    if (seg.mapped_bytes == 0) stats.segment.decrease(pool.is_small, 1);
  }

  void release_expandable_segments() {
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

  static std::vector<Block*> whole_free_segments(BlockPool& pool) {
    std::vector<Block*> result;
    pool.free_blocks.for_each([&](Block& b) {
      if (!b.is_split() && !b.expandable) result.push_back(&b);
    });
    return result;
  }

  // Everything cached goes back: waits for pending stream events first.
  void release_all_cached() {
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

  // With max_split_size set, oversize cached blocks go first: the smallest one that covers
  // `size`, else the largest ones until `size` bytes are released.
  bool release_oversize_blocks(StreamHandle stream, std::size_t size) {
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

  // Above garbage_collection_threshold of the memory limit, reclaims the cached segments that
  // have gone unused longest (age counted in pool lookups), oldest first, until below it.
  void collect_garbage() {
    if (memory_limit == 0 || config.garbage_collection_threshold <= 0.0) return;
    const auto threshold = static_cast<std::size_t>(config.garbage_collection_threshold * static_cast<double>(memory_limit));
    if (reserved() <= threshold) return;
    const std::size_t target = reserved() - threshold;
    std::size_t reclaimed = 0;
    while (reclaimed < target) {
      std::vector<Block*> candidates = whole_free_segments(large_pool);
      for (Block* b : whole_free_segments(small_pool)) candidates.push_back(b);
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

  // ---- stream events ------------------------------------------------------------------

  void process_events() {
    StreamEvents* events = backend.stream_events();
    std::size_t kept = 0;
    for (PendingEvent& p : pending_events) {
      if (!events->completed(p.event)) {
        pending_events[kept++] = p;
        continue;
      }
      events->destroy(p.event);
      if (--p.block->pending_events == 0) return_block(p.block, true);
    }
    pending_events.resize(kept);
  }

  void synchronize_and_free_events() {
    if (pending_events.empty()) return;
    StreamEvents* events = backend.stream_events();
    events->synchronize_device();
    ++stats.num_sync_all_streams;
    for (PendingEvent& p : pending_events) {
      events->destroy(p.event);
      if (--p.block->pending_events == 0) return_block(p.block, true);
    }
    pending_events.clear();
  }

  // ---- reading ------------------------------------------------------------------------

  std::size_t largest_free() const {
    std::size_t largest = 0;
    for (const BlockPool* pool : {&small_pool, &large_pool})
      pool->free_blocks.for_each([&](const Block& b) { largest = std::max(largest, b.size); });
    return largest;
  }

  std::size_t free_cached_bytes() const {
    std::size_t total = 0;
    for (const BlockPool* pool : {&small_pool, &large_pool})
      pool->free_blocks.for_each([&](const Block& b) { total += b.size; });
    return total;
  }

  double fragmentation() const {
    const std::size_t free_bytes = free_cached_bytes();
    if (free_bytes == 0) return 0.0;
    return 1.0 - static_cast<double>(largest_free()) / static_cast<double>(free_bytes);
  }

  SegmentInfo describe(const Block* head, bool expandable) const {
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

  [[noreturn]] void throw_out_of_memory(std::size_t requested, std::size_t rounded, StreamHandle stream) {
    ++stats.num_ooms;
    if (observer) observer(AllocatorEvent{AllocatorEventKind::Oom, 0, rounded, requested, stream, BlockCategory::Unknown, 0});
    OomFacts facts;
    facts.device = backend.device();
    facts.requested_bytes = requested;
    facts.device_info = backend.memory_info();
    facts.allocated_bytes = static_cast<std::size_t>(stats.allocated_bytes[StatType::All].current);
    facts.reserved_bytes = reserved();
    facts.largest_free_block = largest_free();
    facts.fragmentation = fragmentation();
    facts.memory_limit = memory_limit;
    facts.config = config;
    throw OutOfMemoryError(describe_out_of_memory(facts));
  }
};

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
}

Block* CachingAllocator::allocate(std::size_t bytes, StreamHandle stream, BlockCategory category) {
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  if (bytes > kLargestRequest) s.throw_out_of_memory(bytes, bytes, stream);
  if (!s.pending_events.empty()) s.process_events();
  const std::size_t size = round_size(bytes, config_);
  BlockPool& pool = s.pool_for(size, stream);
  Block* b = config_.caching ? s.take_free_block(pool, stream, size) : nullptr;
  if (!b) {
    s.collect_garbage();
    b = s.new_memory(pool, stream, size);
    if (!b) {
      // The backend said no: free what no tensor uses (oversize blocks first), then retry.
      ++s.stats.num_alloc_retries;
      if (s.release_oversize_blocks(stream, size)) b = s.new_memory(pool, stream, size);
      if (!b) {
        s.release_all_cached();
        b = s.new_memory(pool, stream, size);
      }
      if (!b) s.throw_out_of_memory(bytes, size, stream);
    }
  }
  const bool was_split = b->is_split() && !b->expandable;
  if (s.should_split(b, size)) {
    s.split(b, size);
  } else if (was_split) {
    // An inactive split block becomes active whole.
    s.stats.inactive_split.decrease(pool.is_small, 1);
    s.stats.inactive_split_bytes.decrease(pool.is_small, static_cast<std::int64_t>(b->size));
  }
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
  s.notify(AllocatorEventKind::Alloc, b, b->size);
  return b;
}

void CachingAllocator::free(Block* block) {
  if (!block) return;
  std::lock_guard lock(impl_->mutex);
  Impl& s = *impl_;
  if (!block->allocated) throw Error("CachingAllocator::free: block at " + std::to_string(reinterpret_cast<std::uintptr_t>(block->ptr)) + " is not allocated (double free?)");
  const bool small = Impl::counts_as_small(*block);
  // Step 1: the caller's bytes are released at once.
  block->allocated = false;
  s.stats.allocation.decrease(small, 1);
  s.stats.allocated_bytes.decrease(small, static_cast<std::int64_t>(block->size));
  if (block->size >= s.max_split()) s.stats.oversize_allocations.decrease(1);
  s.notify(AllocatorEventKind::FreeRequested, block, block->size);
  // Step 2: the block returns to the free set, now or once other streams are done with it.
  StreamEvents* events = block->stream_uses.empty() ? nullptr : s.backend.stream_events();
  if (events) {
    for (StreamHandle use : block->stream_uses) {
      s.pending_events.push_back({events->record(use), block});
      ++block->pending_events;
    }
    block->stream_uses.clear();
    s.active_stats.begin_pending(small, static_cast<std::int64_t>(block->size));
    return;
  }
  block->stream_uses.clear();
  s.return_block(block, false);
}

void CachingAllocator::set_category(Block* block, BlockCategory category) {
  std::lock_guard lock(impl_->mutex);
  block->category = category;
}

void CachingAllocator::record_stream(Block* block, StreamHandle stream) {
  std::lock_guard lock(impl_->mutex);
  if (stream == block->stream) return;
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end())
    block->stream_uses.push_back(stream);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(impl_->mutex);
  impl_->notify_marker(AllocatorEventKind::CacheEmptied);
  impl_->release_all_cached();
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
  impl_->notify_marker(AllocatorEventKind::PeaksReset);
  impl_->stats.reset_peak();
  impl_->active_stats.reset_peak(impl_->stats);
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

CachingAllocator::PoolId CachingAllocator::create_private_pool() {
  std::lock_guard lock(impl_->mutex);
  const PoolId id = impl_->next_private_pool_id++;
  impl_->private_pools.emplace(id, std::make_unique<Impl::PrivatePool>(id));
  return id;
}

void CachingAllocator::begin_allocate_to_pool(PoolId pool, StreamHandle stream) {
  std::lock_guard lock(impl_->mutex);
  Impl::PrivatePool& p = impl_->private_pool(pool);
  if (p.small.released) throw Error("begin_allocate_to_pool: private pool " + std::to_string(pool) + " was released");
  for (const auto& c : impl_->captures)
    if (c.stream == stream) throw Error("begin_allocate_to_pool: the stream already allocates to a private pool");
  impl_->captures.push_back({stream, &p});
}

void CachingAllocator::end_allocate_to_pool(PoolId pool) {
  std::lock_guard lock(impl_->mutex);
  Impl::PrivatePool& p = impl_->private_pool(pool);
  std::erase_if(impl_->captures, [&](const Impl::CaptureTarget& c) { return c.pool == &p; });
}

void CachingAllocator::release_private_pool(PoolId pool) {
  std::lock_guard lock(impl_->mutex);
  Impl::PrivatePool& p = impl_->private_pool(pool);
  std::erase_if(impl_->captures, [&](const Impl::CaptureTarget& c) { return c.pool == &p; });
  p.small.released = p.large.released = true;
  for (BlockPool* bp : {&p.large, &p.small})
    for (Block* b : Impl::whole_free_segments(*bp)) impl_->release_segment(b);
  impl_->release_expandable_segments();
  impl_->drop_released_private_pools();
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
