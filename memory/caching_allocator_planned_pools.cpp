// Recorded and statically planned private pools. A captured step makes the same
// requests in the same order on every capture: one capture is recorded (record_private_pool), a
// planner lays the requests out in one arena offline (analysis/static_plan.h), and the next capture
// is served from that arena (plan_private_pool). Serving a planned request carves its exact bytes
// out of the free block of the arena that covers them: a valid plan never places two requests
// live at the same time on the same bytes, and a freed block merges with its free neighbours as
// anywhere else, so the covering free block always exists while the capture follows the plan.
#include <algorithm>
#include <string>

#include "core/errors.h"
#include "core/format_bytes.h"
#include "memory/caching_allocator_impl.h"

namespace sublet::memory {
namespace {

std::size_t rounded_request(std::size_t bytes) { return detail::round_up(std::max<std::size_t>(bytes, 1), kMinBlockSize); }

// The free block of the segment starting at `head` that covers [begin, begin + size), or nullptr.
Block* free_block_covering(Block* head, const char* begin, std::size_t size) {
  for (Block* b = head; b; b = b->next) {
    const char* start = static_cast<const char*>(b->ptr);
    if (start + b->size <= begin) continue;
    const bool covers = start <= begin && begin + size <= start + b->size;
    return covers && b->cached ? b : nullptr;
  }
  return nullptr;
}

}  // namespace

Block* CachingAllocator::Impl::take_planned_block(const BlockPool& pool, std::size_t bytes) {
  PrivatePool& p = private_pool(pool.private_pool_id);
  if (!p.plan || !p.plan->abandoned.empty()) return nullptr;
  PoolPlan& plan = *p.plan;
  const std::size_t index = plan.next++;
  const std::size_t size = rounded_request(bytes);
  auto abandon = [&](const std::string& why) -> Block* {
    plan.abandoned = "request #" + std::to_string(index) + ": " + why;
    return nullptr;
  };
  if (index >= plan.placements.size())
    return abandon("the plan has only " + std::to_string(plan.placements.size()) + " requests");
  const ArenaPlacement& want = plan.placements[index];
  if (want.size != size)
    return abandon("asks " + std::to_string(size) + " B, the plan recorded " + std::to_string(want.size) + " B");
  if (!plan.arena) {
    StreamHandle stream = nullptr;  // the arena belongs to the capturing stream, as a pool's segments do
    for (const CaptureTarget& c : captures)
      if (c.pool == &p) stream = c.stream;
    plan.arena = new_segment(p.large, stream, plan.arena_bytes);
    if (!plan.arena) return abandon("the arena of " + format_bytes(plan.arena_bytes) + " could not be allocated");
    p.large.free_blocks.insert(*plan.arena);
  }
  Block* f = free_block_covering(plan.arena, static_cast<const char*>(plan.arena->ptr) + want.offset, want.size);
  if (!f) return abandon("its planned bytes at offset " + std::to_string(want.offset) + " are still in use");
  // Inactive-split statistics: `f` (counted if it had neighbours) gives way to the free pieces
  // left before and after the carved block, which have a neighbour (the block) by construction.
  const bool f_counted = f->is_split();
  const auto f_size = static_cast<std::int64_t>(f->size);
  p.large.free_blocks.erase(*f);
  const std::size_t front_bytes = want.offset - static_cast<std::size_t>(static_cast<char*>(f->ptr) -
                                                                         static_cast<char*>(plan.arena->ptr));
  std::int64_t inactive_blocks = 0, inactive_bytes = 0;
  Block* b = f;
  if (front_bytes > 0) {
    b = cut_after(f, front_bytes);
    p.large.free_blocks.insert(*f);
    inactive_blocks += 1;
    inactive_bytes += static_cast<std::int64_t>(f->size);
  }
  if (b->size > want.size) {
    Block* rest = cut_after(b, want.size);
    p.large.free_blocks.insert(*rest);
    inactive_blocks += 1;
    inactive_bytes += static_cast<std::int64_t>(rest->size);
  }
  if (f_counted) {
    inactive_blocks -= 1;
    inactive_bytes -= f_size;
  }
  apply_change(stats.inactive_split, false, inactive_blocks);
  apply_change(stats.inactive_split_bytes, false, inactive_bytes);
  ++plan.served;
  return b;
}

void CachingAllocator::Impl::record_request(const Block* b, std::size_t bytes) {
  PoolRecording& r = private_pool(b->pool->private_pool_id).recording;
  if (!r.on) return;
  const std::uint64_t id = r.next_id++;
  r.live[b] = id;
  r.events.push_back({.action = TraceEvent::Action::Alloc, .category = b->category, .id = id,
                      .size = rounded_request(bytes), .stream = 0});
}

void CachingAllocator::Impl::record_free(const Block* b) {
  auto it = private_pools.find(b->pool->private_pool_id);
  if (it == private_pools.end()) return;
  PoolRecording& r = it->second->recording;
  auto live = r.live.find(b);
  if (live == r.live.end()) return;
  r.events.push_back({.action = TraceEvent::Action::Free, .id = live->second});
  r.live.erase(live);
}

void CachingAllocator::record_private_pool(PoolId pool) {
  std::lock_guard lock(impl_->mutex);
  Impl::PoolRecording& r = impl_->private_pool(pool).recording;
  r = {};
  r.on = true;
}

std::vector<TraceEvent> CachingAllocator::recorded_private_pool(PoolId pool) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->private_pool(pool).recording.events;
}

void CachingAllocator::plan_private_pool(PoolId pool, std::size_t arena_bytes, std::vector<ArenaPlacement> placements) {
  for (std::size_t i = 0; i < placements.size(); ++i) {
    const ArenaPlacement& a = placements[i];
    if (a.size == 0 || a.size % kMinBlockSize != 0 || a.offset % kMinBlockSize != 0 || a.offset + a.size > arena_bytes)
      throw ValueError("plan_private_pool: placement #" + std::to_string(i) + " (offset " + std::to_string(a.offset) +
                       ", size " + std::to_string(a.size) + ") must be a non-empty multiple of 512 B inside the arena of " +
                       std::to_string(arena_bytes) + " B");
  }
  std::lock_guard lock(impl_->mutex);
  Impl::PrivatePool& p = impl_->private_pool(pool);
  for (const auto& c : impl_->captures)
    if (c.pool == &p) throw Error("plan_private_pool: private pool " + std::to_string(pool) + " is already capturing");
  p.plan.emplace(arena_bytes, std::move(placements));
}

CachingAllocator::PoolPlanStatus CachingAllocator::private_pool_plan(PoolId pool) const {
  std::lock_guard lock(impl_->mutex);
  const Impl::PrivatePool& p = impl_->private_pool(pool);
  if (!p.plan) return {};
  return {.planned = true, .arena_bytes = p.plan->arena_bytes, .planned_requests = p.plan->placements.size(),
          .served = p.plan->served, .abandoned = p.plan->abandoned};
}

}  // namespace sublet::memory
