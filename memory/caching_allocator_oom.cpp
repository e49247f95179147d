// The cache-miss path: no cached block fits, so new memory comes from the backend; when the
// backend says no, the cache is freed in stages and the request retried; when nothing helps,
// OutOfMemoryError with the facts a user needs (oom_message.h).
#include "core/errors.h"
#include "memory/caching_allocator_impl.h"
#include "memory/oom_message.h"

namespace sublet::memory {

Block* CachingAllocator::Impl::allocate_new_memory(BlockPool& pool, StreamHandle stream, std::size_t size,
                                                   std::size_t requested) {
  collect_garbage();
  if (Block* b = new_memory(pool, stream, size)) return b;
  // The backend said no: free what no tensor uses (oversize blocks first), then retry.
  if (release_oversize_blocks(stream, size))
    if (Block* b = new_memory(pool, stream, size)) return b;
  release_all_cached();
  // As PyTorch's num_alloc_retries: counts the attempt after the whole cache was given back
  // (alloc_block's isRetry), not the cheaper retry after releasing oversize blocks.
  ++stats.num_alloc_retries;
  if (Block* b = new_memory(pool, stream, size)) return b;
  throw_out_of_memory(requested, size, stream);
}

void CachingAllocator::Impl::throw_out_of_memory(std::size_t requested, std::size_t rounded, StreamHandle stream) {
  ++stats.num_ooms;
  emit(AllocatorEventKind::Oom, 0, rounded, requested, stream);
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
  facts.waste = measure_waste(&pool_for(rounded, stream), stream);
  throw OutOfMemoryError(describe_out_of_memory(facts));
}

}  // namespace sublet::memory
