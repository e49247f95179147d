// Private pools, as PyTorch's graph pools: while a capture is active on a stream, that stream's
// allocations come from (and its frees return to) the pool's own segments (pool_for picks them),
// so the addresses a captured CUDA graph uses are never handed to anyone else. A pool's segments
// go back to the device only after release_private_pool(), once their blocks are free.
#include <string>

#include "core/errors.h"
#include "memory/caching_allocator_impl.h"

namespace sublet::memory {

CachingAllocator::Impl::PrivatePool& CachingAllocator::Impl::private_pool(std::uint64_t id) {
  auto it = private_pools.find(id);
  if (it == private_pools.end()) throw Error("CachingAllocator: no private pool " + std::to_string(id));
  return *it->second;
}

bool CachingAllocator::Impl::pool_is_empty(const BlockPool& pool) const {
  for (const Block& head : segments)
    if (head.pool == &pool) return false;
  for (const auto& seg : expandable_segments)
    if (seg->pool == &pool) return false;
  return true;
}

// A released private pool disappears once its last segment has gone back.
void CachingAllocator::Impl::drop_released_private_pools() {
  for (auto it = private_pools.begin(); it != private_pools.end();) {
    PrivatePool& p = *it->second;
    if (p.small.released && pool_is_empty(p.small) && pool_is_empty(p.large)) it = private_pools.erase(it);
    else ++it;
  }
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
  p.recording.on = false;
  p.recording.live.clear();
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

}  // namespace sublet::memory
