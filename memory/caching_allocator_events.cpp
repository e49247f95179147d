// Stream events: a block used on other streams (record_stream) is reused only after the work
// those streams had enqueued before its free has completed. Its free records one event per such
// stream; the block rejoins the free set when the last one has completed (checked at the next
// allocation) or when the cache is released (which synchronises the device).
#include <algorithm>

#include "memory/caching_allocator_impl.h"

namespace sublet::memory {

void CachingAllocator::record_stream(Block* block, StreamHandle stream) {
  std::lock_guard lock(impl_->mutex);
  SUBLET_DEBUG_ASSERT(block->allocated, "record_stream is called on an allocated block");
  if (stream == block->stream) return;
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end())
    block->stream_uses.push_back(stream);
}

// Step 2 of a free, deferred: one event per stream that used the block.
void CachingAllocator::Impl::defer_until_streams_done(Block* block, bool small) {
  StreamEvents* events = backend.stream_events();
  for (StreamHandle use : block->stream_uses) {
    pending_events.push_back({events->record(use), block});
    ++block->pending_events;
  }
  block->stream_uses.clear();
  active_stats.begin_pending(small, static_cast<std::int64_t>(block->size));
}

void CachingAllocator::Impl::process_events() {
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

void CachingAllocator::Impl::synchronize_and_free_events() {
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

}  // namespace sublet::memory
