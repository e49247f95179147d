#pragma once
// The sub-landlord. Takes segments from a Backend and cuts them into blocks, following the
// rules of PyTorch's CUDA caching allocator:
//  - sizes round up to 512 B (large sizes by roundup_power2_divisions);
//  - requests <= 1 MiB use the small pool (2 MiB segments), others the large pool (20 MiB
//    segments below 10 MiB, else the request rounded up to 2 MiB);
//  - best fit among free blocks of the same stream (size bins with a bitmap, free_block_bins.h);
//    split when the remainder is worth keeping; blocks >= max_split_size are never split and serve
//    only requests within 20 MiB of them;
//  - with expandable segments, one segment per stream serves every size (small requests still
//    count as the small pool's in the statistics);
//  - freeing a block (step 1) lowers allocated bytes at once; the block (step 2) joins the free
//    set and merges with free neighbours. Reserved memory only shrinks in empty_cache(), on the
//    out-of-memory path, or by garbage collection above the threshold.
// Thread-safe: one lock (allocator_mutex.h) guards all state. A cache hit makes no backend call,
// no system call and no heap allocation.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memory/backend.h"
#include "memory/block.h"
#include "memory/config.h"
#include "memory/stats.h"
#include "memory/trace_event.h"
#include "memory/waste.h"

namespace sublet::memory {

inline constexpr std::size_t kMinBlockSize = 512;               // every size rounds to this
inline constexpr std::size_t kSmallSize = 1 * kMiB;             // largest small-pool request
inline constexpr std::size_t kSmallBuffer = 2 * kMiB;           // small-pool segment
inline constexpr std::size_t kLargeBuffer = 20 * kMiB;          // large-pool segment for < 10 MiB
inline constexpr std::size_t kMinLargeAlloc = 10 * kMiB;
inline constexpr std::size_t kRoundLarge = 2 * kMiB;            // larger segments round to this

// One block of a snapshot: what memory_viz calls a block.
struct BlockInfo {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::size_t requested_size = 0;
  enum class State { ActiveAllocated, ActivePending, Inactive } state = State::Inactive;
  BlockCategory category = BlockCategory::Unknown;
  std::uint32_t annotation = 0;
};

struct SegmentInfo {
  std::uintptr_t address = 0;
  std::size_t total_size = 0;
  std::size_t allocated_size = 0;
  std::size_t active_size = 0;
  std::size_t requested_size = 0;
  bool is_small_pool = false;
  bool is_expandable = false;
  std::uint64_t private_pool_id = 0;  // non-zero: memory of a private pool (graph capture)
  StreamHandle stream = nullptr;
  std::vector<BlockInfo> blocks;
};

// Optional listener for every allocator event (the allocation history of the profiling layer).
// Called with the allocator's lock held: keep it short and never call back into the allocator.
// CacheEmptied and PeaksReset mark calls of empty_cache() and reset_peak_memory_stats(), so that
// a replayed trace does what the recorded program did.
enum class AllocatorEventKind : std::uint8_t {
  Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, SegmentMap, SegmentUnmap, Oom,
  CacheEmptied, PeaksReset
};
struct AllocatorEvent {
  AllocatorEventKind kind;
  std::uintptr_t address;
  std::size_t size;
  std::size_t requested_size;
  StreamHandle stream;
  BlockCategory category;
  std::uint32_t annotation;
};
using AllocatorObserver = std::function<void(const AllocatorEvent&)>;

class CachingAllocator {
 public:
  explicit CachingAllocator(std::unique_ptr<Backend> backend, AllocatorConfig config = {});
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Never returns nullptr: throws OutOfMemoryError (after freeing the cache and retrying).
  // size 0 is served as the minimum block so that every allocation has a distinct address.
  Block* allocate(std::size_t bytes, StreamHandle stream = nullptr,
                  BlockCategory category = BlockCategory::Unknown);
  void free(Block* block);
  // Re-tags a live block (e.g. a tensor saved for backward becomes an Activation). Under the
  // allocator's lock, so snapshots taken concurrently never read a half-written tag.
  void set_category(Block* block, BlockCategory category);
  // The block will also be used on `stream`: it is reused only after that stream's work
  // enqueued before the free has completed.
  void record_stream(Block* block, StreamHandle stream);

  // Returns every wholly free segment to the backend (and unmaps free tails of expandable ones).
  void empty_cache();

  std::size_t memory_allocated() const;
  std::size_t memory_reserved() const;
  std::size_t max_memory_allocated() const;
  std::size_t max_memory_reserved() const;
  void reset_peak_memory_stats();
  void reset_accumulated_memory_stats();
  DeviceStats stats() const;
  // torch.cuda.memory_stats()'s flat keys, and the waste split's (waste.*, memory/waste.h).
  std::map<std::string, std::int64_t> memory_stats() const;
  std::string memory_summary() const;
  std::vector<SegmentInfo> snapshot() const;
  // Largest free cached block and the share of free reserved memory outside it.
  std::size_t largest_free_block() const;
  double fragmentation() const;
  // Reserved memory split into requested bytes and kinds of waste (memory/waste.h,
  // docs/fragmentation.md): now, and at the first moment reserved memory reached its peak (since
  // the last reset_peak_memory_stats()).
  WasteSplit waste() const;
  WasteSplit waste_at_peak() const;

  // Private pools, as PyTorch's graph pools: while a capture is active on `stream`, that stream's
  // allocations come from (and its frees return to) the pool's own segments, so the addresses a
  // captured CUDA graph uses are never handed to anyone else. Segments of a pool go back to the
  // device only after release_private_pool(), once their blocks are free.
  using PoolId = std::uint64_t;
  PoolId create_private_pool();
  void begin_allocate_to_pool(PoolId pool, StreamHandle stream);
  void end_allocate_to_pool(PoolId pool);
  void release_private_pool(PoolId pool);

  // Static plans for private pools (analysis/static_plan.h lays them out). A captured
  // step makes the same requests in the same order every time it is captured, so one capture can
  // be recorded and the next served from one arena laid out offline:
  //  - record_private_pool(pool): while the pool's capture is active, its requests and frees are
  //    recorded (sizes rounded to 512 B, ids in request order); recorded_private_pool() returns
  //    them. end_allocate_to_pool() stops the recording.
  //  - plan_private_pool(pool, arena_bytes, placements), before the capture: the i-th request is
  //    served at placements[i].offset of one segment of arena_bytes (taken at the first request),
  //    as a block of exactly placements[i].size. A request that departs from the plan (another
  //    size, more requests than planned, or bytes the plan gives it still in use) abandons the
  //    plan: it and every later request follow the pool's usual rules, and private_pool_plan()
  //    says at which request and why. Frees need no plan: a freed block merges with its free
  //    neighbours in the arena as anywhere else.
  struct ArenaPlacement {
    std::size_t size = 0;    // a multiple of 512
    std::size_t offset = 0;  // in the arena; a multiple of 512
  };
  struct PoolPlanStatus {
    bool planned = false;
    std::size_t arena_bytes = 0;
    std::size_t planned_requests = 0;
    std::size_t served = 0;   // requests served at their planned offset
    std::string abandoned;    // empty while the plan holds
  };
  void record_private_pool(PoolId pool);
  std::vector<TraceEvent> recorded_private_pool(PoolId pool) const;
  void plan_private_pool(PoolId pool, std::size_t arena_bytes, std::vector<ArenaPlacement> placements);
  PoolPlanStatus private_pool_plan(PoolId pool) const;

  // Caps the reserved memory at fraction * device capacity (as torch.cuda.set_per_process_memory_fraction).
  void set_memory_fraction(double fraction);
  const AllocatorConfig& config() const { return config_; }
  // Only while nothing is allocated (the rounding and pool rules must not change under live blocks).
  void set_config(const AllocatorConfig& config);
  void set_observer(AllocatorObserver observer);

  Backend& backend() { return *backend_; }
  Device device() const { return backend_->device(); }
  static std::size_t round_size(std::size_t bytes, const AllocatorConfig& config);
  static std::size_t segment_size_for(std::size_t rounded_bytes);

 private:
  struct Impl;
  std::unique_ptr<Backend> backend_;
  AllocatorConfig config_;
  std::unique_ptr<Impl> impl_;
};

// RAII lease of one block; used for workspaces and anything that needs bytes for a scope.
class ScopedBlock {
 public:
  ScopedBlock() = default;
  ScopedBlock(CachingAllocator& allocator, std::size_t bytes, StreamHandle stream = nullptr,
              BlockCategory category = BlockCategory::Temporary)
      : allocator_(&allocator), block_(allocator.allocate(bytes, stream, category)) {}
  ~ScopedBlock() { reset(); }
  ScopedBlock(ScopedBlock&& other) noexcept : allocator_(other.allocator_), block_(other.block_) { other.block_ = nullptr; }
  ScopedBlock& operator=(ScopedBlock&& other) noexcept {
    if (this != &other) { reset(); allocator_ = other.allocator_; block_ = other.block_; other.block_ = nullptr; }
    return *this;
  }
  // A lease that uses `owner`'s block without freeing it: the owner decides when it goes back
  // (ops::WorkspaceHold keeps a second stream's workspaces until that stream's work is joined).
  static ScopedBlock borrow(const ScopedBlock& owner) {
    ScopedBlock view;
    view.block_ = owner.block_;  // allocator_ stays null: reset() does not free
    return view;
  }
  void* get() const { return block_ ? block_->ptr : nullptr; }
  Block* block() const { return block_; }
  void reset() {
    if (block_ && allocator_) allocator_->free(block_);
    block_ = nullptr;
  }

 private:
  CachingAllocator* allocator_ = nullptr;
  Block* block_ = nullptr;
};

}  // namespace sublet::memory
