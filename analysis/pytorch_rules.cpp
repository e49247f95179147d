// PyTorch 2.11's DeviceCachingAllocator as a replay model (pytorch_rules.h). Function names follow
// PyTorch's (get_free_block, alloc_block, try_merge_blocks, ...) so the two can be read side by
// side; each keeps the order of PyTorch's steps, because the order decides which block is chosen.
#include "analysis/pytorch_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/caching_allocator.h"
#include "memory/config.h"

namespace sublet::memory {
namespace {

constexpr std::size_t kMinBlock = 512;
constexpr std::size_t kSmall = std::size_t{1} << 20;       // largest small request
constexpr std::size_t kSmallBuf = std::size_t{2} << 20;    // small segments; small expandable pages
constexpr std::size_t kLargeBuf = std::size_t{20} << 20;   // 1-10 MiB segments; large expandable pages
constexpr std::size_t kMinLargeAlloc = std::size_t{10} << 20;
constexpr std::size_t kRoundLarge = std::size_t{2} << 20;
// Made-up addresses start far above any real device address, so they never meet recorded ones.
constexpr std::uint64_t kSyntheticBase = std::uint64_t{1} << 52;

struct Pool;
struct Segment;  // an expandable segment

struct PBlock {
  std::uint64_t stream = 0;
  std::size_t size = 0;
  std::uint64_t ptr = 0;
  Pool* pool = nullptr;
  bool allocated = false;
  bool mapped = true;  // false: unmapped address space of an expandable segment
  PBlock* prev = nullptr;
  PBlock* next = nullptr;
  Segment* segment = nullptr;
  bool is_split() const { return prev != nullptr || next != nullptr; }
  void splice(PBlock* before, PBlock* after) {
    if (before) before->next = this;
    prev = before;
    if (after) after->prev = this;
    next = after;
  }
};

// BlockComparatorSize and BlockComparatorAddress.
struct BySize {
  bool operator()(const PBlock* a, const PBlock* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};
struct ByAddress {
  bool operator()(const PBlock* a, const PBlock* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    return a->ptr < b->ptr;
  }
};

struct Pool {
  bool small = false;
  std::set<PBlock*, BySize> blocks;          // free, mapped
  std::set<PBlock*, ByAddress> unmapped;     // unmapped ranges of expandable segments
};

// ExpandableSegment: a reserved address range mapped page by page.
struct Segment {
  std::uint64_t base = 0;
  std::size_t page = 0;
  std::vector<bool> mapped;  // per page
  std::size_t left(std::uint64_t p) const { return static_cast<std::size_t>((p - base) / page); }
  std::size_t right(std::uint64_t p) const { return static_cast<std::size_t>((p - base + page - 1) / page); }
};

struct Range {
  std::uint64_t ptr = 0;
  std::size_t size = 0;
};

class Model {
 public:
  Model(const AllocatorConfig& config, std::size_t capacity, const RecordedSegments* recorded)
      : config_(config), capacity_(capacity), recorded_(recorded) {
    small_.small = true;
  }
  ~Model() {
    for (PBlock* b : all_) delete b;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  PBlock* malloc(std::size_t orig_size, std::uint64_t stream) {
    // More than the device holds can never be served; refused before the rounding below, which
    // would wrap for sizes near 2^64.
    if (orig_size > capacity_) return nullptr;
    const std::size_t size = CachingAllocator::round_size(orig_size, config_);
    Pool& pool = size <= kSmall ? small_ : large_;
    const std::size_t alloc_size = allocation_size(size);
    PBlock* block = get_free_block(pool, stream, size);
    if (!block) {
      block = alloc_block(pool, stream, size, alloc_size, false);
      if (!block && release_available_cached_blocks(pool, stream, size)) block = alloc_block(pool, stream, size, alloc_size, false);
      if (!block) {
        release_cached_blocks();
        block = alloc_block(pool, stream, size, alloc_size, true);
      }
    }
    if (!block) return nullptr;
    return alloc_found_block(block, pool, stream, size, should_split(*block, size));
  }

  void free(PBlock* block) {
    block->allocated = false;
    allocated_ -= block->size;
    Pool& pool = *block->pool;
    for (PBlock* candidate : {block->prev, block->next}) try_merge_blocks(block, candidate, pool);
    pool.blocks.insert(block);
  }

  // emptyCache(): release_cached_blocks.
  void release_cached_blocks() {
    release_blocks(large_);
    release_blocks(small_);
  }

  void reset_peaks() {
    peak_allocated_ = allocated_;
    peak_reserved_ = reserved_;
  }

  std::size_t allocated() const { return allocated_; }
  std::size_t reserved() const { return reserved_; }
  std::size_t peak_allocated() const { return peak_allocated_; }
  std::size_t peak_reserved() const { return peak_reserved_; }
  std::int64_t device_allocs() const { return device_allocs_; }
  std::int64_t retries() const { return retries_; }
  std::int64_t segments_created() const { return segments_created_; }

  double fragmentation() const {
    std::size_t largest = 0;
    for (const Pool* pool : {&small_, &large_})
      for (const PBlock* b : pool->blocks) largest = std::max(largest, b->size);
    const std::size_t free_bytes = reserved_ - allocated_;
    return free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(free_bytes);
  }

 private:
  PBlock* make_block(std::uint64_t stream, std::size_t size, Pool* pool, std::uint64_t ptr) {
    auto* b = new PBlock{.stream = stream, .size = size, .ptr = ptr, .pool = pool};
    all_.insert(b);
    return b;
  }
  void destroy(PBlock* b) {
    all_.erase(b);
    delete b;
  }

  static std::size_t allocation_size(std::size_t size) {
    if (size <= kSmall) return kSmallBuf;
    if (size < kMinLargeAlloc) return kLargeBuf;
    return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
  }

  bool should_split(const PBlock& block, std::size_t size) const {
    const std::size_t remaining = block.size - size;
    if (block.pool->small || config_.expandable_segments) return remaining >= kMinBlock;
    return size < config_.max_split_size && remaining > kSmall;
  }

  std::size_t max_split() const { return config_.max_split_size; }

  PBlock* get_free_block(Pool& pool, std::uint64_t stream, std::size_t size) {
    PBlock key{.stream = stream, .size = size, .ptr = 0};
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    if ((*it)->segment) {
      // A block followed by unmapped space counts as the size it can grow to.
      const auto expandable_size = [](const PBlock* b) {
        return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
      };
      if (config_.expandable_segments) {
        auto next = std::next(it);
        while ((*it)->segment && next != pool.blocks.end() && (*next)->stream == stream &&
               expandable_size(*next) < expandable_size(*it))
          it = next++;
      } else {
        do ++it;
        while (it != pool.blocks.end() && (*it)->segment && (*it)->stream == stream);
        if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
      }
    }
    // Only the first fit is looked at: an oversize one fails a normal request, and an oversize
    // request takes an oversize block only within kLargeBuffer of its size.
    if (size < max_split() && (*it)->size >= max_split()) return nullptr;
    if (size >= max_split() && (*it)->size >= size + kLargeBuf) return nullptr;
    PBlock* b = *it;
    pool.blocks.erase(it);
    return b;
  }

  PBlock* alloc_found_block(PBlock* block, Pool& pool, std::uint64_t stream, std::size_t size, bool split) {
    if (split) {
      PBlock* remaining = block;
      block = make_block(stream, size, &pool, remaining->ptr);
      block->segment = remaining->segment;
      block->prev = remaining->prev;
      if (block->prev) block->prev->next = block;
      block->next = remaining;
      remaining->prev = block;
      remaining->ptr += size;
      remaining->size -= size;
      pool.blocks.insert(remaining);
    }
    block->allocated = true;
    allocated_ += block->size;
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    return block;
  }

  // Returns the size subsumed, 0 when `src` cannot merge into `dst`.
  std::size_t try_merge_blocks(PBlock* dst, PBlock* src, Pool& pool) {
    if (!src || src->allocated || dst->mapped != src->mapped) return 0;
    if (dst->prev == src) {  // [src dst]
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev) dst->prev->next = dst;
    } else {  // [dst src]
      dst->next = src->next;
      if (dst->next) dst->next->prev = dst;
    }
    const std::size_t subsumed = src->size;
    dst->size += subsumed;
    if (src->mapped)
      pool.blocks.erase(src);
    else
      pool.unmapped.erase(src);
    destroy(src);
    return subsumed;
  }

  // ---- device memory --------------------------------------------------------------------------

  std::uint64_t next_device_address(std::size_t size) {
    const std::size_t i = device_allocs_made_++;
    if (recorded_ && i < recorded_->device_allocs.size() && recorded_->device_allocs[i].size == size)
      return recorded_->device_allocs[i].address;
    return synthetic_address(size);
  }
  std::uint64_t synthetic_address(std::size_t size) {
    const std::uint64_t a = kSyntheticBase + synthetic_used_;
    synthetic_used_ += (size + kLargeBuf - 1) / kLargeBuf * kLargeBuf;
    return a;
  }
  void add_reserved(std::size_t bytes) {
    reserved_ += bytes;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    ++device_allocs_;
  }

  PBlock* alloc_block(Pool& pool, std::uint64_t stream, std::size_t size, std::size_t alloc_size, bool retry) {
    if (retry) ++retries_;
    if (config_.expandable_segments) return try_allocate_expandable_block(pool, stream, size);
    if (reserved_ + alloc_size > capacity_) return nullptr;  // cudaMalloc fails
    PBlock* b = make_block(stream, alloc_size, &pool, next_device_address(alloc_size));
    add_reserved(alloc_size);
    ++segments_created_;
    return b;
  }

  // Frees oversize cached blocks, only as many as the request needs.
  bool release_available_cached_blocks(Pool& pool, std::uint64_t stream, std::size_t size) {
    if (!config_.max_split_size_set()) return false;
    PBlock key{.stream = stream, .size = std::max(size, max_split()), .ptr = 0};
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) {
      if (it == pool.blocks.begin()) return false;
      std::size_t released = 0;
      --it;
      while (released < key.size && (*it)->size >= max_split() && (*it)->stream == stream) {
        auto cur = it;
        released += (*it)->size;
        if (it != pool.blocks.begin()) {
          --it;
          release_block(*cur);
        } else {
          release_block(*cur);
          break;
        }
      }
      return released >= key.size;
    }
    release_block(*it);
    return true;
  }

  void release_block(PBlock* block) {
    reserved_ -= block->size;
    block->pool->blocks.erase(block);
    destroy(block);
  }

  void release_blocks(Pool& pool) {
    std::vector<PBlock*> to_unmap;
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      PBlock* b = *it++;
      if (b->segment)
        to_unmap.push_back(b);
      else if (!b->prev && !b->next)
        release_block(b);
    }
    for (PBlock* b : to_unmap) {
      unmap_block(b);
      if (!b->prev && !b->next && !b->mapped) release_expandable_segment(b);
    }
  }

  // ---- expandable segments --------------------------------------------------------------------

  PBlock* find_expandable_block(Pool& pool, std::uint64_t stream, std::size_t size) {
    const auto allocatable = [](const PBlock* b) { return b != nullptr && !b->allocated; };
    const auto has_space = [&](const PBlock* b) {
      std::size_t bytes = 0;
      while (bytes < size && allocatable(b)) {
        bytes += b->size;
        b = b->next;
      }
      return bytes >= size;
    };
    PBlock key{.stream = stream, .ptr = 0};
    for (auto it = pool.unmapped.lower_bound(&key); it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
      PBlock* c = *it;
      if (allocatable(c->prev)) c = c->prev;  // free space right before the unmapped range
      if (has_space(c)) return c;
    }
    auto seg = std::make_unique<Segment>();
    seg->page = pool.small ? kSmallBuf : kLargeBuf;
    // PyTorch reserves 1 1/8 of the device's memory; the replay's capacity stands for it.
    const std::size_t pages = (capacity_ + capacity_ / 8 + seg->page - 1) / seg->page;
    const std::size_t i = segments_made_++;
    ++segments_created_;
    seg->base = recorded_ && i < recorded_->expandable_bases.size() ? recorded_->expandable_bases[i]
                                                                    : synthetic_address(pages * seg->page);
    seg->mapped.assign(pages, false);
    PBlock* candidate = make_block(stream, pages * seg->page, &pool, seg->base);
    candidate->mapped = false;
    candidate->segment = seg.get();
    segments_.push_back(std::move(seg));
    pool.unmapped.insert(candidate);
    return candidate;
  }

  // ExpandableSegment::map: the pages covering [ptr, ptr + size); size 0 when the device is full.
  Range map_pages(Segment& seg, std::uint64_t ptr, std::size_t size) {
    const std::size_t begin = seg.left(ptr), end = seg.right(ptr + size);
    if (begin == end) return {seg.base + begin * seg.page, 0};
    if (reserved_ + (end - begin) * seg.page > capacity_) return {seg.base + begin * seg.page, 0};
    for (std::size_t p = begin; p < end; ++p) seg.mapped[p] = true;
    return {seg.base + begin * seg.page, (end - begin) * seg.page};
  }
  // ExpandableSegment::unmap: the whole pages inside [ptr, ptr + size).
  static Range unmap_pages(Segment& seg, std::uint64_t ptr, std::size_t size) {
    const std::size_t begin = seg.right(ptr), end = seg.left(ptr + size);
    if (begin >= end) return {ptr, 0};
    for (std::size_t p = begin; p < end; ++p) seg.mapped[p] = false;
    return {seg.base + begin * seg.page, (end - begin) * seg.page};
  }

  bool map_block(PBlock* to_map, std::size_t size) {
    const Range range = map_pages(*to_map->segment, to_map->ptr, size);
    if (range.size == 0) return false;
    Pool& pool = *to_map->pool;
    pool.unmapped.erase(to_map);
    to_map->mapped = true;
    if (range.size < to_map->size) {
      PBlock* remaining = make_block(to_map->stream, to_map->size - range.size, &pool, to_map->ptr + range.size);
      remaining->mapped = false;
      remaining->segment = to_map->segment;
      remaining->splice(to_map, to_map->next);
      pool.unmapped.insert(remaining);
      to_map->size = range.size;
    }
    try_merge_blocks(to_map, to_map->prev, pool);
    try_merge_blocks(to_map, to_map->next, pool);
    pool.blocks.insert(to_map);
    add_reserved(range.size);
    return true;
  }

  PBlock* try_allocate_expandable_block(Pool& pool, std::uint64_t stream, std::size_t size) {
    PBlock* candidate = find_expandable_block(pool, stream, size);
    if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, size))) return nullptr;
    while (candidate->size < size) {
      // free -> unmapped -> ...: map some of the unmapped part, which merges with the free one.
      const std::size_t remaining = size - candidate->size;
      PBlock* next = candidate->next;
      if (!map_block(next, std::min(remaining, next->size))) return nullptr;
      candidate = next;
    }
    pool.blocks.erase(candidate);
    return candidate;
  }

  void unmap_block(PBlock* block) {
    const Range unmapped = unmap_pages(*block->segment, block->ptr, block->size);
    if (unmapped.size == 0) return;
    Pool& pool = *block->pool;
    pool.blocks.erase(block);
    const std::size_t before = static_cast<std::size_t>(unmapped.ptr - block->ptr);
    if (before > 0) {
      PBlock* before_free = make_block(block->stream, before, &pool, block->ptr);
      before_free->segment = block->segment;
      before_free->splice(block->prev, block);
      pool.blocks.insert(before_free);
    }
    const std::size_t after = block->size - (before + unmapped.size);
    if (after > 0) {
      PBlock* after_free = make_block(block->stream, after, &pool, unmapped.ptr + unmapped.size);
      after_free->segment = block->segment;
      after_free->splice(block, block->next);
      pool.blocks.insert(after_free);
    }
    block->ptr = unmapped.ptr;
    block->size = unmapped.size;
    block->mapped = false;
    try_merge_blocks(block, block->prev, pool);
    try_merge_blocks(block, block->next, pool);
    pool.unmapped.insert(block);
    reserved_ -= unmapped.size;
  }

  void release_expandable_segment(PBlock* block) {
    block->pool->unmapped.erase(block);
    Segment* seg = block->segment;
    destroy(block);
    std::erase_if(segments_, [&](const std::unique_ptr<Segment>& s) { return s.get() == seg; });
  }

  AllocatorConfig config_;
  std::size_t capacity_;
  const RecordedSegments* recorded_;
  Pool small_, large_;
  std::unordered_set<PBlock*> all_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::size_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  std::int64_t device_allocs_ = 0, retries_ = 0, segments_created_ = 0;
  std::size_t device_allocs_made_ = 0, segments_made_ = 0;
  std::uint64_t synthetic_used_ = 0;
};

}  // namespace

ReplayResult replay_trace_pytorch(const std::vector<TraceEvent>& events, const std::string& config_text, std::size_t capacity,
                                  const RecordedSegments* recorded) {
  ReplayResult result;
  result.setting = config_text.empty() ? "default" : config_text;
  result.rules = "pytorch";
  result.capacity = capacity;
  Model model(AllocatorConfig::parse(config_text), capacity, recorded);
  std::unordered_map<std::uint64_t, PBlock*> live;
  std::size_t peak_allocated_seen = 0;
  // Reserved but unallocated right after the allocation that first reached the reserved peak, as
  // sublet's waste split at the peak takes it.
  std::size_t peak_reserved_seen = 0, unallocated_at_peak = 0;
  // Read once per peak, as replay_trace does (replay.cpp says why).
  bool peak_pending = false;
  const auto settle_peak = [&] {
    if (!peak_pending) return;
    result.fragmentation_at_peak = model.fragmentation();
    peak_pending = false;
  };
  for (const TraceEvent& e : events) {
    if (e.action == TraceEvent::Action::EmptyCache) {
      settle_peak();
      model.release_cached_blocks();
    } else if (e.action == TraceEvent::Action::ResetPeaks) {
      settle_peak();
      model.reset_peaks();
      peak_allocated_seen = model.allocated();
      peak_reserved_seen = model.reserved();
      unallocated_at_peak = model.reserved() - model.allocated();
      result.fragmentation_at_peak = model.fragmentation();
    } else if (e.action == TraceEvent::Action::Free) {
      settle_peak();
      if (auto it = live.find(e.id); it != live.end()) {
        model.free(it->second);
        live.erase(it);
      }
    } else {
      if (peak_pending && may_run_out(model.reserved(), e.size, capacity)) settle_peak();
      PBlock* block = model.malloc(e.size, e.stream);
      if (!block) {
        result.out_of_memory = true;
        result.oom_event = result.events_replayed;
        result.oom_message = fmt::format("out of memory: tried to allocate {} with {} reserved of {} (PyTorch's rules)",
                                         format_bytes(static_cast<std::int64_t>(std::min<std::size_t>(e.size, INT64_MAX))),
                                         format_bytes(static_cast<std::int64_t>(model.reserved())),
                                         format_bytes(static_cast<std::int64_t>(capacity)));
        break;
      }
      live[e.id] = block;
      if (model.reserved() > peak_reserved_seen) {
        peak_reserved_seen = model.reserved();
        unallocated_at_peak = model.reserved() - model.allocated();
      }
      if (model.allocated() >= peak_allocated_seen) {
        peak_allocated_seen = model.allocated();
        peak_pending = true;
      }
    }
    ++result.events_replayed;
  }
  settle_peak();
  result.peak_allocated = model.peak_allocated();
  result.peak_reserved = model.peak_reserved();
  result.device_allocs = model.device_allocs();
  result.alloc_retries = model.retries();
  SweepRow& row = result.sweep;
  row.label = result.setting;
  row.alloc_conf = config_text;
  row.peak_allocated = static_cast<std::int64_t>(result.peak_allocated);
  row.peak_reserved = static_cast<std::int64_t>(result.peak_reserved);
  row.unallocated_at_peak = static_cast<std::int64_t>(unallocated_at_peak);
  row.segments_created = model.segments_created();
  row.device_allocs = result.device_allocs;
  row.retries = result.alloc_retries;
  row.ooms = result.out_of_memory ? 1 : 0;
  return result;
}

}  // namespace sublet::memory
