#pragma once
// Private to the caching allocator: its state and the jobs it is made of, one file each.
//   caching_allocator.cpp               pools, finding, splitting and merging blocks; allocate/free
//   caching_allocator_expandable.cpp    expandable segments (map at the tail, unmap free tails)
//   caching_allocator_release.cpp       giving segments back: empty_cache, garbage collection
//   caching_allocator_events.cpp        stream events (record_stream: reuse after other streams)
//   caching_allocator_private_pools.cpp private pools (CUDA graph capture)
//   caching_allocator_planned_pools.cpp recorded and statically planned private pools
//   caching_allocator_reading.cpp       statistics, snapshot, fragmentation (reading only)
//   caching_allocator_oom.cpp           the cache-miss path: new memory, retries, out of memory
//   caching_allocator_waste.cpp         the waste split (memory/waste.h), now and at the reserved peak
// Every function here runs with `mutex` held. The cache-hit path (take_free_block, split,
// return_block) lives in caching_allocator.cpp next to allocate() and free(), so that the
// compiler inlines it there as it did when the allocator was one file.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/debug_assert.h"
#include "memory/active_stats.h"
#include "memory/allocator_block_arena.h"
#include "memory/allocator_mutex.h"
#include "memory/block_pool.h"
#include "memory/caching_allocator.h"
#include "memory/waste.h"

namespace sublet::memory {

namespace detail {
inline std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
}  // namespace detail

struct CachingAllocator::Impl {
  Impl(Backend& backend_ref, const AllocatorConfig& config_ref) : backend(backend_ref), config(config_ref) {}

  // Requests above this cannot be rounded or segmented without overflow; no device has this much.
  static constexpr std::size_t kLargestRequest = std::size_t{1} << 60;

  Backend& backend;
  const AllocatorConfig& config;
  mutable AllocatorMutex mutex;
  bool peak_waste_due = false;  // next to the lock, which every call touches: waste_at_peak below
  BlockPool small_pool{true};
  BlockPool large_pool{false};
  SegmentList segments;  // head block of every non-expandable segment
  std::vector<std::unique_ptr<ExpandableSegment>> expandable_segments;
  BlockArena arena;
  DeviceStats stats;          // all but the active families, which active_stats derives
  ActiveStats active_stats;
  // In recording order; `stream` is the one the event was recorded on (process_events).
  struct PendingEvent { EventHandle event; Block* block; StreamHandle stream; };
  std::vector<PendingEvent> pending_events;
  std::size_t memory_limit = 0;  // 0 = no per-process fraction set
  AllocatorObserver observer;
  // A private pool's recording of its capture's requests (record_private_pool).
  struct PoolRecording {
    bool on = false;
    std::vector<TraceEvent> events;
    std::unordered_map<const Block*, std::uint64_t> live;  // block -> id of its request
    std::uint64_t next_id = 1;
  };
  // A private pool's static plan (plan_private_pool). The constructor is spelled out: clang 14
  // cannot default-construct a nested class with member initializers inside std::optional here.
  struct PoolPlan {
    PoolPlan(std::size_t arena, std::vector<ArenaPlacement> planned) : arena_bytes(arena), placements(std::move(planned)) {}
    std::size_t arena_bytes = 0;
    std::vector<ArenaPlacement> placements;
    std::size_t next = 0;      // index of the next request
    std::size_t served = 0;
    Block* arena = nullptr;    // the arena segment's head, once taken
    std::string abandoned;     // why the plan no longer holds
  };
  struct PrivatePool {
    explicit PrivatePool(std::uint64_t id) : small(true, id), large(false, id) {}
    BlockPool small;
    BlockPool large;
    PoolRecording recording;
    std::optional<PoolPlan> plan;
  };
  std::map<std::uint64_t, std::unique_ptr<PrivatePool>> private_pools;
  struct CaptureTarget { StreamHandle stream; PrivatePool* pool; };
  std::vector<CaptureTarget> captures;  // streams whose allocations go to a private pool
  std::uint64_t next_private_pool_id = 1;
  // The waste split at the first moment reserved memory reached its peak. A new peak is only
  // flagged on the cache-miss path (count_new_reserved); allocate() measures once its block is
  // handed out, so the cache-hit path pays one test of the flag.
  WasteSplit waste_at_peak;

  // ---- small helpers (inline: used on the hot path) -------------------------------------

  // With expandable segments a stream's requests of every size share one segment (the large
  // pool's): each separate segment leaves up to a page of its mapped tail unused and its own holes,
  // which on recorded ResNet steps (sublet replay) raises peak reserved memory by a few percent.
  // Small requests still count in the small pool's allocation statistics (counts_as_small).
  bool one_segment_per_stream() const { return config.caching && config.expandable_segments; }
  static bool counts_as_small(const Block& b) { return b.pool->is_small || (b.expandable && b.size <= kSmallSize); }
  static bool is_free_and_cached(const Block* b) { return b != nullptr && b->cached; }

  BlockPool& pool_for(std::size_t rounded, StreamHandle stream) {
    const bool small = rounded <= kSmallSize && !one_segment_per_stream();
    for (const CaptureTarget& c : captures)
      if (c.stream == stream) return small ? c.pool->small : c.pool->large;
    return small ? small_pool : large_pool;
  }

  std::size_t max_split() const { return config.max_split_size; }
  std::size_t reserved() const { return static_cast<std::size_t>(stats.reserved_bytes[StatType::All].current); }
  bool within_memory_limit(std::size_t extra) const { return memory_limit == 0 || reserved() + extra <= memory_limit; }
  void count_new_reserved(bool small, std::size_t bytes) {
    const std::int64_t peak_before = stats.reserved_bytes[StatType::All].peak;
    stats.reserved_bytes.increase(small, static_cast<std::int64_t>(bytes));
    if (stats.reserved_bytes[StatType::All].peak > peak_before) peak_waste_due = true;
  }
  static void apply_change(StatArray& stat, bool small, std::int64_t change) {
    if (change > 0) stat.increase(small, change);
    if (change < 0) stat.decrease(small, -change);
  }

  // ---- the observer -------------------------------------------------------------------------

  // The one path by which events reach the observer (the allocation history). Cheap when no
  // observer is set: one test of the std::function.
  void emit(AllocatorEventKind kind, std::uintptr_t address, std::size_t size, std::size_t requested_size,
            StreamHandle stream, BlockCategory category = BlockCategory::Unknown, std::uint32_t annotation = 0) {
    if (!observer) return;
    observer(AllocatorEvent{kind, address, size, requested_size, stream, category, annotation});
  }
  // An event about one block: its address, stream, request, category and annotation.
  void emit(AllocatorEventKind kind, const Block* b, std::size_t size) {
    emit(kind, reinterpret_cast<std::uintptr_t>(b->ptr), size, b->requested_size, b->stream, b->category,
         b->annotation);
  }
  // An event about the allocator as a whole (CacheEmptied, PeaksReset).
  void emit(AllocatorEventKind kind) { emit(kind, 0, 0, 0, nullptr); }

  // ---- pools, finding, splitting, merging (caching_allocator.cpp) ---------------------------
  // take_free_block, should_split, split and absorb_next are defined `inline` there, so that the
  // compiler inlines them into allocate() and free() as it did when they were defined in the
  // class; they can be called only from that file.
  Block* take_free_block(BlockPool& pool, StreamHandle stream, std::size_t size);
  Block* new_segment(BlockPool& pool, StreamHandle stream, std::size_t segment_bytes);
  Block* new_memory(BlockPool& pool, StreamHandle stream, std::size_t size);
  bool should_split(const Block* b, std::size_t size) const;
  void split(Block* b, std::size_t size);
  // Step 2 of a release: the block rejoins the free set, merged with free neighbours.
  // `was_pending`: it waited for other streams' events since its caller freed it.
  void return_block(Block* b, bool was_pending);
  void absorb_next(Block* lower);
  // Debug checks: `pool` is one of this allocator's pools.
  bool owns_pool(const BlockPool* pool) const;

  // ---- expandable segments (caching_allocator_expandable.cpp) ------------------------------
  ExpandableSegment* expandable_segment_for(BlockPool& pool, StreamHandle stream);
  static Block* last_block(ExpandableSegment& seg);
  Block* grow_expandable(BlockPool& pool, StreamHandle stream, std::size_t size);
  void shrink_expandable(ExpandableSegment& seg);
  void release_expandable_segments();

  // ---- releasing cached memory (caching_allocator_release.cpp) -----------------------------
  void release_segment(Block* b);
  static std::vector<Block*> whole_free_segments(BlockPool& pool);
  void release_all_cached();
  bool release_oversize_blocks(StreamHandle stream, std::size_t size);
  void collect_garbage();

  // ---- stream events (caching_allocator_events.cpp) ----------------------------------------
  void defer_until_streams_done(Block* block, bool small);
  void process_events();
  void synchronize_and_free_events();
  // Stream-ordered reuse: whether `block`'s free takes that path, the free's events, the wait
  // its next taker enqueues, and the host wait before its bytes go back to the device.
  bool reuse_is_stream_ordered(const Block* block) const;
  void order_reuse_after_streams(Block* block);
  void wait_before_reuse(Block* block, StreamHandle stream);
  void settle_before_release(Block* block);

  // ---- private pools (caching_allocator_private_pools.cpp) ---------------------------------
  PrivatePool& private_pool(std::uint64_t id);
  bool pool_is_empty(const BlockPool& pool) const;
  void drop_released_private_pools();

  // ---- static plans of private pools (caching_allocator_planned_pools.cpp) -----------------
  // Serves the next request of a planned private pool at its planned offset; nullptr when the
  // pool has no plan (or it was abandoned, which this may do): the usual rules serve it then.
  Block* take_planned_block(const BlockPool& pool, std::size_t bytes);
  // The recording of a private pool's requests (only called for blocks of private pools).
  void record_request(const Block* b, std::size_t bytes);
  void record_free(const Block* b);

  // Detaches the bytes of `b` beyond `size` as a new free block (not yet in any bin), linked
  // after `b` in its segment; `b` keeps its first `size` bytes. The block surgery of split().
  Block* cut_after(Block* b, std::size_t size) {
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
    return rest;
  }

  // ---- reading (caching_allocator_reading.cpp) ---------------------------------------------
  std::size_t largest_free() const;
  std::size_t free_cached_bytes() const;
  double fragmentation() const;
  SegmentInfo describe(const Block* head, bool expandable) const;

  // ---- the waste split (caching_allocator_waste.cpp) ---------------------------------------
  // Walks every segment. With `request_pool` (an out-of-memory error), free segments of another
  // pool or stream than the request's are counted apart too.
  WasteSplit measure_waste(const BlockPool* request_pool = nullptr, StreamHandle request_stream = nullptr) const;
  // Measuring walks every segment, so with many segments a trace whose every step is a new peak
  // (each request on a stream of its own) would be quadratic. Up to kExactPeakSegments segments the
  // split is taken at every new peak; above, at most once per (segments / 8) new peaks, so the
  // walks cost O(1) per request on average and waste_at_peak() may come from an earlier, lower peak
  // (peak_waste_exact says which).
  static constexpr std::int64_t kExactPeakSegments = 4096;
  std::int64_t peaks_since_capture = 0;
  bool peak_waste_exact = true;
  void capture_peak_waste() {
    peak_waste_due = false;
    const std::int64_t segments = stats.segment[StatType::All].current;
    if (segments > kExactPeakSegments && ++peaks_since_capture < segments / 8) {
      peak_waste_exact = false;
      return;
    }
    peaks_since_capture = 0;
    peak_waste_exact = true;
    waste_at_peak = measure_waste();
  }

  // ---- the cache-miss and out-of-memory path (caching_allocator_oom.cpp) -------------------
  Block* allocate_new_memory(BlockPool& pool, StreamHandle stream, std::size_t size, std::size_t requested);
  [[noreturn]] void throw_out_of_memory(std::size_t requested, std::size_t rounded, StreamHandle stream);
};

}  // namespace sublet::memory
