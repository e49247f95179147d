// Stream events: a block used on other streams (record_stream) must not be written by its own
// stream before the work those streams enqueued before its free has completed. Its free records
// one event per such stream, and then one of two things happens:
//  - stream-ordered reuse (backends that can make a stream wait on an event: CUDA), as
//    cudaMallocAsync does across streams: the block rejoins the free set at once, carrying the
//    events (Block::reuse_after); the allocation that next takes its bytes enqueues a wait on
//    them in its own stream, so the device orders the reuse and the host never waits. A block's
//    bytes are only ever taken by its own stream (free bins are per stream), and the wait is
//    enqueued before anything that stream does with them, so the remainder of a split needs no
//    wait of its own. Giving such bytes back to the device (empty_cache, garbage collection,
//    unmapping) first waits for the events, since cudaFree and unmapping are not stream-ordered.
//    Private pools (graph capture) keep the deferred path: a capture must not wait on events
//    recorded outside it.
//  - deferred reuse (the others, as PyTorch's allocator): the block rejoins the free set when
//    the last event has completed (checked at the next allocation) or when the cache is released
//    (which synchronises the device).
#include <algorithm>
#include <array>

#include "core/errors.h"
#include "memory/caching_allocator_impl.h"

namespace sublet::memory {

void StreamEvents::make_stream_wait(StreamHandle, EventHandle) {
  throw Error("StreamEvents::make_stream_wait: this backend cannot make a stream wait on an event "
              "(can_make_stream_wait() is false)");
}

bool CachingAllocator::Impl::reuse_is_stream_ordered(const Block* block) const {
  StreamEvents* events = backend.stream_events();
  return events && events->can_make_stream_wait() && block->pool->private_pool_id == 0;
}

void CachingAllocator::Impl::order_reuse_after_streams(Block* block) {
  StreamEvents* events = backend.stream_events();
  for (StreamHandle use : block->stream_uses) block->reuse_after.push_back(events->record(use));
  block->stream_uses.clear();
}

void CachingAllocator::Impl::wait_before_reuse(Block* block, StreamHandle stream) {
  StreamEvents* events = backend.stream_events();
  for (EventHandle event : block->reuse_after) {
    if (!events->completed(event)) {
      events->make_stream_wait(stream, event);
      ++stats.num_stream_ordered_reuses;
    }
    events->destroy(event);
  }
  block->reuse_after.clear();
}

void CachingAllocator::Impl::settle_before_release(Block* block) {
  if (block->reuse_after.empty()) return;
  StreamEvents* events = backend.stream_events();
  const bool pending = std::any_of(block->reuse_after.begin(), block->reuse_after.end(),
                                   [&](EventHandle e) { return !events->completed(e); });
  if (pending) {
    events->synchronize_device();
    ++stats.num_sync_all_streams;
  }
  for (EventHandle event : block->reuse_after) events->destroy(event);
  block->reuse_after.clear();
}

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
    pending_events.push_back({events->record(use), block, use});
    ++block->pending_events;
  }
  block->stream_uses.clear();
  active_stats.begin_pending(small, static_cast<std::int64_t>(block->size));
}

// Events recorded on one stream complete in the order they were recorded (the stream runs its
// work in order: so do CUDA events; SimulatedBackend completes a stream's events together), so
// once one of a stream's events is found pending, its later ones are kept without asking the
// backend, as PyTorch's process_events stops at a stream's first pending event. Asking about
// every pending event at every allocation would make each allocation cost time in proportion to
// the events waiting behind a busy stream (quadratic over a run).
void CachingAllocator::Impl::process_events() {
  StreamEvents* events = backend.stream_events();
  constexpr std::size_t kTrackedStreams = 8;  // more streams pending at once: the rest are asked
  std::array<StreamHandle, kTrackedStreams> pending_streams{};
  std::size_t num_pending_streams = 0;
  const auto stream_is_pending = [&](StreamHandle stream) {
    return std::find(pending_streams.begin(), pending_streams.begin() + num_pending_streams, stream) !=
           pending_streams.begin() + num_pending_streams;
  };
  std::size_t kept = 0;
  for (PendingEvent& p : pending_events) {
    if (stream_is_pending(p.stream) || !events->completed(p.event)) {
      if (num_pending_streams < kTrackedStreams && !stream_is_pending(p.stream))
        pending_streams[num_pending_streams++] = p.stream;
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
